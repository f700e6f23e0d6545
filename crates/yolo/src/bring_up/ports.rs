//! Host ports for `forwardPorts`, `appPort` and `-p`, chosen when the guard that publishes them
//! is made: the asked port on 127.0.0.1 when it is free, else a free one, so a port some other
//! program holds (a dev server, another project's container) does not fail `up`.
//!
//! Docker would refuse the start with "port is already allocated" or "address already in use";
//! asking first is the only way to choose another. The check binds the port on this machine,
//! so with a remote engine (`DOCKER_HOST=tcp://..`) it says nothing about the engine's ports.
//! The mapping Docker made is what `yolo status` shows (`engine::Container::ports`).

use crate::run_spec::PortPublish;
use std::net::{Ipv4Addr, TcpListener};

/// `ports` with every busy or repeated host port replaced by a free one, and a line for each
/// replacement (`forwarded 3000 -> 127.0.0.1:3001 (3000 was busy)`).
pub(crate) fn fit(ports: &[PortPublish]) -> (Vec<PortPublish>, Vec<String>) {
    // Held until every port is chosen, so two busy ports do not get the same free one.
    let mut held: Vec<TcpListener> = Vec::new();
    let mut fitted = Vec::new();
    let mut notes = Vec::new();
    for port in ports {
        let taken = fitted.iter().any(|p: &PortPublish| p.host == port.host);
        let asked = (!taken).then(|| TcpListener::bind((Ipv4Addr::LOCALHOST, port.host)).ok());
        if let Some(Some(listener)) = asked {
            held.push(listener);
            fitted.push(*port);
            continue;
        }
        let Some(listener) = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).ok() else {
            // No free port at all: leave it to Docker to say so.
            fitted.push(*port);
            continue;
        };
        let host = listener.local_addr().map_or(port.host, |a| a.port());
        held.push(listener);
        notes.push(format!(
            "forwarded {} -> 127.0.0.1:{host} ({} was busy)",
            port.container, port.host
        ));
        fitted.push(PortPublish { host, ..*port });
    }
    (fitted, notes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn publish(host: u16, container: u16) -> PortPublish {
        PortPublish { host, container }
    }

    #[test]
    fn a_free_port_is_kept_and_a_busy_one_replaced() {
        let busy = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let busy_port = busy.local_addr().unwrap().port();
        let free_port = {
            let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
            l.local_addr().unwrap().port()
        };
        let (fitted, notes) = fit(&[publish(free_port, 80), publish(busy_port, 3000)]);
        assert_eq!(fitted[0], publish(free_port, 80));
        assert_eq!(fitted[1].container, 3000);
        assert_ne!(fitted[1].host, busy_port);
        assert_eq!(
            notes,
            [format!(
                "forwarded 3000 -> 127.0.0.1:{} ({busy_port} was busy)",
                fitted[1].host
            )]
        );
    }

    #[test]
    fn one_host_port_asked_twice_gets_two() {
        let free_port = {
            let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
            l.local_addr().unwrap().port()
        };
        let (fitted, notes) = fit(&[publish(free_port, 80), publish(free_port, 81)]);
        assert_eq!(fitted[0].host, free_port);
        assert_ne!(fitted[1].host, free_port);
        assert_eq!(notes.len(), 1);
    }
}
