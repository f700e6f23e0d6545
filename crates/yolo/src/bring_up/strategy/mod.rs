//! The three ways a new session's containers come up, once `Act::fresh` has opened the session
//! and run `initializeCommand`; one file each:
//! - `compose_project`: a Compose project in place of the agent's image and container;
//! - `build_behind_guard`: an image whose build needs the network, built with its RUN steps
//!   behind the guard, which then restarts for the session;
//! - `image_first`: an image pulled, built offline or already there, made before the guard, so
//!   a failing pull or build leaves no guard behind; the guard and the agent then start
//!   together.

mod build_behind_guard;
mod compose_project;
mod image_first;
