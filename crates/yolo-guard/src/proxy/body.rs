//! The bodies the proxy passes on, frame by frame and never buffered whole: a request body
//! whose first frames were read already ([`Held`], a push's commands), one that counts its
//! bytes for the `http` event ([`Counted`]), and a response body whose small frames that are
//! ready together go out as one ([`Coalesced`]).
//!
//! Written by hand: `http-body-util` has mapping and collecting combinators, none that joins
//! frames, and these are a few lines each over `http_body::Body`.

use bytes::{Bytes, BytesMut};
use http_body_util::combinators::BoxBody;
use hyper::body::{Body, Frame, SizeHint};
use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;
/// Every body the proxy sends, either way: the agent's or the host's passed on, or its own.
pub(crate) type ProxyBody = BoxBody<Bytes, BoxError>;

/// A request body whose first frames were read already: those, then the rest as it comes.
pub(crate) struct Held<B> {
    pub(crate) held: VecDeque<Frame<Bytes>>,
    pub(crate) inner: B,
}

impl<B: Body<Data = Bytes> + Unpin> Body for Held<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        if let Some(frame) = self.held.pop_front() {
            return Poll::Ready(Some(Ok(frame)));
        }
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.held.is_empty() && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let held: u64 = self
            .held
            .iter()
            .filter_map(|f| f.data_ref().map(|d| d.len() as u64))
            .sum();
        let inner = self.inner.size_hint();
        let mut hint = SizeHint::new();
        hint.set_lower(inner.lower() + held);
        if let Some(upper) = inner.upper() {
            hint.set_upper(upper + held);
        }
        hint
    }
}

/// Bytes each way of one request.
#[derive(Default)]
pub(crate) struct Tally {
    pub(crate) up: AtomicU64,
    pub(crate) down: AtomicU64,
}

/// A body passed through frame by frame, counting its data.
pub(crate) struct Counted<B> {
    pub(crate) inner: B,
    pub(crate) count: Arc<Tally>,
    pub(crate) up: bool,
}

impl<B: Body<Data = Bytes> + Unpin> Body for Counted<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled {
            if let Some(data) = frame.data_ref() {
                let counter = if self.up {
                    &self.count.up
                } else {
                    &self.count.down
                };
                counter.fetch_add(data.len() as u64, Ordering::Relaxed);
            }
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The most data [`Coalesced`] puts in one frame: with the 9 bytes of an HTTP/2 frame header,
/// one TLS record's worth of plaintext (2^14 bytes), the most one record carries and the most
/// an HTTP/2 frame carries by default. So each frame the agent gets is one record, one
/// encryption and (with the rest of its frame) one write.
pub(crate) const COALESCE: usize = 16 * 1024 - 9;

/// A body whose data frames that are ready at once are joined, up to [`COALESCE`] bytes, and
/// whose bigger frames are cut to that size. Hosts often send small frames (nginx's HTTP/2 data
/// frames are 8 KiB), and each frame passed on as it came is a frame, a TLS record and a write
/// of its own towards the agent: half the downloading guard's time was those (bench/http.sh).
/// Nothing is waited for: when the host has nothing more ready, what was joined goes at once,
/// so the first byte of a streamed response is never held back. Trailers and the end come
/// after the data before them, in order.
pub(crate) struct Coalesced<B: Body> {
    inner: B,
    /// Data taken from `inner` and not yet passed on, uncopied (the rest of a frame).
    rest: Bytes,
    /// What comes after the joined data: a non-data frame, an error or the end (`None`).
    after: Option<Option<Result<Frame<Bytes>, B::Error>>>,
}

impl<B: Body> Coalesced<B> {
    pub(crate) fn new(inner: B) -> Self {
        Coalesced {
            inner,
            rest: Bytes::new(),
            after: None,
        }
    }
}

impl<B: Body<Data = Bytes> + Unpin> Body for Coalesced<B>
where
    B::Error: Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = &mut *self;
        let mut joined = BytesMut::new();
        loop {
            if !this.rest.is_empty() {
                let room = COALESCE - joined.len();
                if joined.is_empty() && this.rest.len() >= room {
                    // A whole frame's worth on its own: passed on uncopied.
                    return Poll::Ready(Some(Ok(Frame::data(this.rest.split_to(room)))));
                }
                let take = room.min(this.rest.len());
                joined.extend_from_slice(&this.rest.split_to(take));
                if joined.len() == COALESCE {
                    return Poll::Ready(Some(Ok(Frame::data(joined.freeze()))));
                }
            }
            if let Some(after) = this.after.take() {
                return Poll::Ready(after);
            }
            let polled = Pin::new(&mut this.inner).poll_frame(cx);
            let after = match polled {
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => {
                        this.rest = data;
                        continue;
                    }
                    Err(frame) => Some(Ok(frame)),
                },
                Poll::Ready(other) => other,
                Poll::Pending if joined.is_empty() => return Poll::Pending,
                // Nothing more is ready: what was joined goes now.
                Poll::Pending => return Poll::Ready(Some(Ok(Frame::data(joined.freeze())))),
            };
            if joined.is_empty() {
                return Poll::Ready(after);
            }
            this.after = Some(after);
            return Poll::Ready(Some(Ok(Frame::data(joined.freeze()))));
        }
    }

    fn is_end_stream(&self) -> bool {
        self.rest.is_empty()
            && match &self.after {
                Some(after) => after.is_none(),
                None => self.inner.is_end_stream(),
            }
    }

    fn size_hint(&self) -> SizeHint {
        let kept = self.rest.len() as u64;
        let inner = if self.after.is_some() {
            SizeHint::with_exact(0)
        } else {
            self.inner.size_hint()
        };
        let mut hint = SizeHint::new();
        hint.set_lower(inner.lower() + kept);
        if let Some(upper) = inner.upper() {
            hint.set_upper(upper + kept);
        }
        hint
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;
    use hyper::HeaderMap;
    use std::task::Waker;

    /// A host's body: each step is a frame that is ready, or a moment with nothing ready.
    enum Step {
        Data(usize, u8),
        Trailers,
        Error,
        Nothing,
    }

    struct Scripted(VecDeque<Step>);

    impl Body for Scripted {
        type Data = Bytes;
        type Error = String;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, String>>> {
            match self.0.pop_front() {
                None => Poll::Ready(None),
                Some(Step::Data(len, byte)) => {
                    Poll::Ready(Some(Ok(Frame::data(Bytes::from(vec![byte; len])))))
                }
                Some(Step::Trailers) => Poll::Ready(Some(Ok(Frame::trailers(HeaderMap::new())))),
                Some(Step::Error) => Poll::Ready(Some(Err("reset".into()))),
                Some(Step::Nothing) => Poll::Pending,
            }
        }

        fn is_end_stream(&self) -> bool {
            self.0.is_empty()
        }
    }

    /// What the agent gets, poll by poll: data lengths, `T` for trailers, `E` for an error,
    /// `-` for a poll that found nothing ready.
    fn frames(steps: Vec<Step>) -> (Vec<String>, Vec<u8>) {
        let mut body = Coalesced::new(Scripted(steps.into()));
        let mut cx = Context::from_waker(Waker::noop());
        let (mut seen, mut bytes) = (Vec::new(), Vec::new());
        loop {
            match Pin::new(&mut body).poll_frame(&mut cx) {
                Poll::Ready(None) => break,
                Poll::Pending => seen.push("-".to_string()),
                Poll::Ready(Some(Err(_))) => seen.push("E".to_string()),
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => {
                        seen.push(data.len().to_string());
                        bytes.extend_from_slice(&data);
                    }
                    Err(_) => seen.push("T".to_string()),
                },
            }
            if seen.len() > 100 {
                panic!("no end: {seen:?}");
            }
        }
        assert!(body.is_end_stream());
        (seen, bytes)
    }

    #[test]
    fn small_frames_ready_together_go_as_one_frame_of_a_record_s_worth() {
        let (seen, bytes) = frames(vec![
            Step::Data(8192, 1),
            Step::Data(8192, 2),
            Step::Data(8192, 3),
            Step::Data(8192, 4),
        ]);
        assert_eq!(seen, ["16375", "16375", "18"]);
        // In order, nothing lost or repeated.
        let mut expected = Vec::new();
        for byte in 1..=4u8 {
            expected.extend(std::iter::repeat_n(byte, 8192));
        }
        assert_eq!(bytes, expected);
    }

    #[test]
    fn nothing_is_held_back_when_the_host_has_nothing_more_ready() {
        // A stream's first event goes out as soon as it came, not when more has come.
        let (seen, _) = frames(vec![
            Step::Nothing,
            Step::Data(20, 1),
            Step::Nothing,
            Step::Data(30, 2),
            Step::Data(40, 3),
            Step::Nothing,
        ]);
        assert_eq!(seen, ["-", "20", "70"]);
    }

    #[test]
    fn a_big_frame_is_cut_to_a_record_s_worth_and_trailers_and_errors_keep_their_place() {
        let (seen, bytes) = frames(vec![
            Step::Data(40_000, 7),
            Step::Data(10, 8),
            Step::Trailers,
        ]);
        assert_eq!(seen, ["16375", "16375", "7260", "T"]);
        assert_eq!(bytes.len(), 40_010);
        let (seen, _) = frames(vec![Step::Data(10, 1), Step::Error]);
        assert_eq!(seen, ["10", "E"]);
    }

    #[test]
    fn an_empty_body_ends_at_once() {
        let (seen, bytes) = frames(vec![]);
        assert!(seen.is_empty() && bytes.is_empty());
        let body = Coalesced::new(http_body_util::Full::new(Bytes::from_static(b"x")));
        assert_eq!(body.size_hint().exact(), Some(1));
        let collected = collect(body);
        assert_eq!(collected, b"x");
    }

    /// The whole body, read the way hyper reads it.
    fn collect<B: Body<Data = Bytes> + Unpin + Send + 'static>(body: Coalesced<B>) -> Vec<u8>
    where
        B::Error: std::fmt::Debug + Unpin + Send,
    {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(body.collect())
            .unwrap()
            .to_bytes()
            .to_vec()
    }
}
