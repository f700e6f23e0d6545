//! `yolo exec` and `yolo shell`: a command in the running container as the remote user, in the
//! workspace folder (`bring_up::attach`); a TTY when stdin is a terminal; the command's exit
//! code is ours. Like `run`'s agent, the command gets the stand-ins of the session's
//! credentials (`http_session::stand_in_env`), never their real values.

use crate::bring_up::attach::attach;
use crate::cli::Target;
use crate::error::Result;
use crate::session::{Hold, Session};

pub(crate) async fn execute(target: &Target, argv: Vec<String>) -> Result<i32> {
    let engine = super::engine_soon();
    let session = Session::open(target, Hold::Read).await?;
    let engine = engine.await?;
    crate::session::checkpoints::before_command(&engine, &session, &argv).await;
    let env = crate::http_session::stand_in_env(&session.state);
    attach(&engine, session, "exec", argv, env).await
}

pub(crate) async fn shell(target: &Target) -> Result<i32> {
    let session = Session::open(target, Hold::Read).await?;
    let engine = super::engine().await?;
    // The user's login shell if the image has one that works, else sh.
    let argv = vec![
        "/bin/sh".into(),
        "-c".into(),
        r#"s=$(getent passwd "$(id -un)" 2>/dev/null | cut -d: -f7); [ -x "$s" ] || s=$(command -v bash || echo /bin/sh); exec "$s" -l"#.into(),
    ];
    let env = crate::http_session::stand_in_env(&session.state);
    attach(&engine, session, "shell", argv, env).await
}
