//! The only code that talks to a Kubernetes cluster: through kube-rs with the user's kubeconfig
//! (or the in-cluster config), it applies the rendered objects (server-side apply, so a second
//! `yolo kube --apply` updates rather than fails), reads the guard's log for
//! `yolo audit --kube`, and the Pod's phase and agent log for `yolo ps` and `yolo logs`.

use crate::error::{Cause, Dependency, Error, Result};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, LogParams, Patch, PatchParams};
use kube::Client;

/// Who yolo is to the API server's field management.
const FIELD_MANAGER: &str = "yolo";

/// What a cluster is wanted for, in the error when there is none.
pub(crate) enum Purpose<'a> {
    Apply,
    Audit,
    /// `yolo ps` / `yolo logs` of this Pod.
    Pod(&'a str),
}

/// A client for `context` of the user's kubeconfig (None: the current context, or the
/// in-cluster config), and the namespace to use (`namespace`, else the context's).
pub(crate) async fn connect(
    namespace: Option<&str>,
    context: Option<&str>,
    purpose: Purpose<'_>,
) -> Result<(Client, String)> {
    let (what, instead) = match purpose {
        Purpose::Apply => (
            "to apply to".to_string(),
            ", or leave out --apply and apply the printed YAML yourself (`yolo kube | kubectl apply -f -`)",
        ),
        Purpose::Audit => ("to read the guard's log from".to_string(), ""),
        Purpose::Pod(pod) => (format!("to ask about Pod {pod}"), ""),
    };
    let none = format!("no Kubernetes cluster {what}: ");
    let config = match context {
        None => kube::Config::infer()
            .await
            .map_err(|e| Cause::around(none, e, "")),
        Some(context) => kube::Config::from_kubeconfig(&kube::config::KubeConfigOptions {
            context: Some(context.to_string()),
            ..Default::default()
        })
        .await
        .map_err(|e| Cause::around(format!("{none}context {context}: "), e, "")),
    };
    let config = config.map_err(|cause| {
        Error::dependency(Dependency::Kubernetes, cause).with_lines(
            "hint",
            [format!(
                "point KUBECONFIG (or ~/.kube/config) at your cluster{instead}"
            )],
        )
    })?;
    let namespace = namespace
        .map(str::to_string)
        .unwrap_or_else(|| config.default_namespace.clone());
    let client = Client::try_from(config).map_err(|e| {
        Error::dependency(
            Dependency::Kubernetes,
            Cause::of("cannot make a Kubernetes client", e),
        )
    })?;
    Ok((client, namespace))
}

/// The kubeconfig's current context, which `connect(.., None, ..)` uses when there is a
/// kubeconfig: kept in a run's record so `yolo ps` asks the same cluster after a switch.
pub(crate) fn current_context() -> Option<String> {
    kube::config::Kubeconfig::read()
        .ok()
        .and_then(|k| k.current_context)
}

/// The cluster's DNS: the `kube-dns` Service of `kube-system` (CoreDNS keeps that name), port 53.
pub(crate) async fn cluster_dns(client: &Client) -> Result<std::net::SocketAddr> {
    use k8s_openapi::api::core::v1::Service;
    let services: Api<Service> = Api::namespaced(client.clone(), "kube-system");
    let before = "cannot find the cluster's DNS for the guard (";
    let after = "); pass --upstream-dns with your cluster DNS Service's address";
    let service = services.get("kube-dns").await.map_err(|e| {
        Error::dependency(
            Dependency::Kubernetes,
            Cause::around(format!("{before}kube-system/kube-dns: "), e, after),
        )
    })?;
    let ip = service
        .spec
        .and_then(|s| s.cluster_ip)
        .and_then(|ip| ip.parse::<std::net::IpAddr>().ok())
        .ok_or_else(|| {
            Error::dependency(
                Dependency::Kubernetes,
                format!("{before}kube-system/kube-dns has no cluster IP{after}"),
            )
        })?;
    Ok(std::net::SocketAddr::new(ip, 53))
}

/// Apply the ConfigMap, then the Pod (which mounts it); the Pod's uid as the cluster gave it.
pub(crate) async fn apply(
    client: &Client,
    namespace: &str,
    config_map: &ConfigMap,
    pod: &Pod,
) -> Result<Option<String>> {
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let name = |meta: &Option<String>| meta.clone().unwrap_or_default();
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    maps.patch(
        &name(&config_map.metadata.name),
        &params,
        &Patch::Apply(config_map),
    )
    .await
    .map_err(|e| api_error("applying the guard's ConfigMap", e))?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let applied = pods
        .patch(&name(&pod.metadata.name), &params, &Patch::Apply(pod))
        .await
        .map_err(|e| api_error("applying the Pod", e))?;
    Ok(applied.metadata.uid)
}

/// The guard container's log of `pod` (its audit events, one JSON line each).
pub(crate) async fn guard_log(client: &Client, namespace: &str, pod: &str) -> Result<String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let params = LogParams {
        container: Some(super::render::GUARD.into()),
        ..Default::default()
    };
    pods.logs(pod, &params)
        .await
        .map_err(|e| api_error(&format!("reading the guard's log of Pod {pod}"), e))
}

/// How a Pod is doing, as [`pod_state`] reads it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PodState {
    /// `Pending`, `Running`, `Succeeded`, `Failed`, `Unknown`.
    pub(crate) phase: String,
    /// The agent container's exit code, once it ended.
    pub(crate) agent_exit: Option<i32>,
    /// The Pod's uid: another uid under the same name is another Pod (applied again).
    pub(crate) uid: Option<String>,
}

/// How the agent of `pod` is doing. None: no such Pod.
pub(crate) async fn pod_state(
    client: &Client,
    namespace: &str,
    pod: &str,
) -> Result<Option<PodState>> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let found = pods
        .get_opt(pod)
        .await
        .map_err(|e| api_error(&format!("reading Pod {pod}"), e))?;
    Ok(found.map(|found| {
        let status = found.status.clone().unwrap_or_default();
        let exit = status
            .container_statuses
            .iter()
            .flatten()
            .find(|c| c.name == super::render::AGENT)
            .and_then(|c| c.state.as_ref()?.terminated.as_ref())
            .map(|t| t.exit_code);
        PodState {
            phase: status.phase.unwrap_or_else(|| "Unknown".into()),
            agent_exit: exit,
            uid: found.metadata.uid,
        }
    }))
}

/// The agent container's log of `pod`, as it comes (`follow`: until the container ends).
pub(crate) async fn agent_log(
    client: &Client,
    namespace: &str,
    pod: &str,
    follow: bool,
    mut each: impl FnMut(&[u8]) -> Result<()>,
) -> Result<()> {
    use futures_util::AsyncReadExt;
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let params = LogParams {
        container: Some(super::render::AGENT.into()),
        follow,
        ..Default::default()
    };
    let reading = |e: std::io::Error| {
        Error::dependency(
            Dependency::Kubernetes,
            Cause::of(
                format!("kubernetes: reading the agent's log of Pod {pod}"),
                e,
            ),
        )
    };
    let mut stream = pods
        .log_stream(pod, &params)
        .await
        .map_err(|e| api_error(&format!("reading the agent's log of Pod {pod}"), e))?;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = stream.read(&mut buf).await.map_err(reading)?;
        if n == 0 {
            return Ok(());
        }
        each(&buf[..n])?;
    }
}

fn api_error(action: &str, e: kube::Error) -> Error {
    let hint = match &e {
        kube::Error::Api(status) if status.code == 403 => Some(
            "your account may not create Pods with NET_ADMIN here; docs/kubernetes.md says what the namespace must allow",
        ),
        kube::Error::Api(status) if status.code == 404 => {
            Some("check the Pod's name and --namespace")
        }
        _ => None,
    };
    let error = Error::dependency(
        Dependency::Kubernetes,
        Cause::of(format!("kubernetes: {action} failed"), e),
    );
    match hint {
        // Under a heading of its own: a line break inside the message would print escaped.
        Some(hint) => error.with_lines("hint", [hint]),
        None => error,
    }
}
