mod errors;
mod exec;
mod hooks;
mod images;
mod lifecycle;
mod policy;
