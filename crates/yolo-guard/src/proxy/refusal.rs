//! Why the proxy refuses a request, shared by the decisions over its head (`rules`) and over a
//! push's commands (`git`): its own file so that neither imports the other for it.

/// Why a request is refused: the proxy answers 403 with [`Refusal::body`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refusal {
    /// The config entry that decided (`http."api.example.test".allow`, `credentials.NAME`).
    pub rule: String,
    pub reason: String,
    /// `credential_misuse`: the credential whose stand-in went where it may not.
    pub misuse: Option<String>,
    /// What the user could run or change to let such a request through.
    pub allow_hint: String,
    /// The rule that would let exactly this request through (`HOST METHOD /path`), where the
    /// host's own allow rules refused it and the user may be asked (`[firewall] on_refused =
    /// "ask"`, `ask::http_question`); `None` for every other refusal (a misused stand-in, the
    /// repository's narrowing, a push, a path not in its plain form).
    pub lift: Option<String>,
}

impl Refusal {
    /// The 403's body: short text an agent can pass on to its user.
    pub fn body(&self) -> String {
        format!(
            "Refused by yolo's guard.\nrule: {}\nreason: {}\nto allow it: {}\n",
            self.rule, self.reason, self.allow_hint
        )
    }
}
