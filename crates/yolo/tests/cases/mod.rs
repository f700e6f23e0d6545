mod cli;
mod errors;
mod exec;
mod hooks;
mod images;
mod lifecycle;
mod network;
mod policy;
