//! A small OpenTelemetry collector for the audit-export tests: an OTLP/HTTP logs receiver on
//! 127.0.0.1 that decodes each request with the protocol's own message definitions
//! (`opentelemetry-proto`, protobuf through prost) and answers as a collector does; or, as
//! [`Mode::Hang`], one that takes connections and requests and never answers.

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Answer 200 with an empty `ExportLogsServiceResponse`.
    Answer,
    /// Read each request and never answer (the connection stays open).
    Hang,
}

pub struct Collector {
    pub endpoint: String,
    received: Arc<Mutex<Vec<ExportLogsServiceRequest>>>,
    /// Requests whose body was not a valid `ExportLogsServiceRequest` (or not POST /v1/logs).
    bad: Arc<Mutex<Vec<String>>>,
}

impl Collector {
    pub fn start(mode: Mode) -> Collector {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let received = Arc::new(Mutex::new(Vec::new()));
        let bad = Arc::new(Mutex::new(Vec::new()));
        let (r, b) = (Arc::clone(&received), Arc::clone(&bad));
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (r, b) = (Arc::clone(&r), Arc::clone(&b));
                std::thread::spawn(move || serve(stream, mode, &r, &b));
            }
        });
        Collector {
            endpoint,
            received,
            bad,
        }
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<ExportLogsServiceRequest> {
        self.received.lock().unwrap().clone()
    }

    pub fn bad(&self) -> Vec<String> {
        self.bad.lock().unwrap().clone()
    }
}

/// Requests on one connection, until it closes.
fn serve(
    stream: TcpStream,
    mode: Mode,
    received: &Mutex<Vec<ExportLogsServiceRequest>>,
    bad: &Mutex<Vec<String>>,
) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
            return;
        }
        let mut length = 0usize;
        let mut content_type = String::new();
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                match name.to_ascii_lowercase().as_str() {
                    "content-length" => length = value.trim().parse().unwrap_or(0),
                    "content-type" => content_type = value.trim().to_string(),
                    _ => {}
                }
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        if mode == Mode::Hang {
            continue; // never answered; the client times out
        }
        let decoded = <ExportLogsServiceRequest as prost::Message>::decode(body.as_slice());
        match decoded {
            Ok(request)
                if request_line.starts_with("POST /v1/logs ")
                    && content_type == "application/x-protobuf" =>
            {
                received.lock().unwrap().push(request)
            }
            Ok(_) => bad
                .lock()
                .unwrap()
                .push(format!("{} ({content_type})", request_line.trim_end())),
            Err(e) => bad.lock().unwrap().push(format!("undecodable: {e}")),
        }
        let answer =
            "HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
        if writer.write_all(answer.as_bytes()).is_err() {
            return;
        }
    }
}
