mod errors;
mod exec;
mod exit_codes;
mod hooks;
mod images;
mod lifecycle;
mod network;
mod policy;
