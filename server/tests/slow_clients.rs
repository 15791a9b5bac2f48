//! Slow and idle clients against the real binary over raw sockets: headers or a body sent too
//! slowly, a kept-alive connection left idle, connections past the cap, and what none of
//! these limits may cut (a long-lived event stream, a connection idle for less than the idle
//! timeout). Each limit is set short; the tests wait for the server to act, bounded by
//! [`WAIT`], and never time it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::*;

const GET_CARD: &[u8] =
    b"GET /.well-known/agent-card.json HTTP/1.1\r\nHost: 127.0.0.1\r\nA2A-Version: 1.0\r\n\r\n";

/// How long each read waits before the test does something else (sends a byte, checks).
const POLL: Duration = Duration::from_millis(200);

fn connect(server: &Server) -> TcpStream {
    let addr = server.url.strip_prefix("http://").unwrap();
    let stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(POLL)).unwrap();
    stream
}

fn timed_out(err: &std::io::Error) -> bool {
    matches!(err.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
}

/// What the server sent until it closed the connection, calling `meanwhile` whenever a read
/// waited [`POLL`] for nothing; fails if the connection is still open after [`WAIT`].
fn until_closed(stream: &mut TcpStream, mut meanwhile: impl FnMut(&mut TcpStream)) -> String {
    let deadline = Instant::now() + WAIT;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        assert!(
            Instant::now() < deadline,
            "the connection is still open after {WAIT:?}; the server sent {:?}",
            String::from_utf8_lossy(&got)
        );
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(err) if timed_out(&err) => meanwhile(stream),
            // Reset: closed with our unread bytes still in its buffer.
            Err(_) => break,
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

/// One whole response (its head and a `Content-Length` body), read off the connection.
/// The agent card asked for on `stream`, which must be answered 200: the whole response.
fn get_card(stream: &mut TcpStream) -> String {
    stream.write_all(GET_CARD).unwrap();
    let response = read_response(stream);
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    response
}

fn read_response(stream: &mut TcpStream) -> String {
    let deadline = Instant::now() + WAIT;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&got).into_owned();
        if let Some(end) = text.find("\r\n\r\n") {
            let length = text[..end]
                .lines()
                .find_map(|line| {
                    let (name, value) = line.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse::<usize>().unwrap())
                })
                .unwrap_or(0);
            if got.len() >= end + 4 + length {
                return text;
            }
        }
        assert!(Instant::now() < deadline, "no whole response: {text:?}");
        match stream.read(&mut buf) {
            Ok(0) => panic!("closed before a whole response: {text:?}"),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(err) if timed_out(&err) => {}
            Err(err) => panic!("{err}: {text:?}"),
        }
    }
}

#[test]
fn a_client_that_sends_half_its_headers_is_disconnected() {
    let server = server_with("--header-timeout-secs", "1");
    let mut stream = connect(&server);
    stream
        .write_all(b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Ty")
        .unwrap();
    // A byte now and then buys no time: the timeout runs from the head's first byte.
    let got = until_closed(&mut stream, |s| {
        let _ = s.write_all(b"p");
    });
    assert_eq!(got, "", "closed without an answer");

    // A connection that sends nothing at all has as long for its first request.
    let mut silent = connect(&server);
    assert_eq!(until_closed(&mut silent, |_| {}), "");
}

#[test]
fn a_body_trickled_slower_than_the_body_timeout_is_cut() {
    let server = server_with("--body-timeout-secs", "1");
    let mut stream = connect(&server);
    stream
        .write_all(
            b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nA2A-Version: 1.0\r\n\
              Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{",
        )
        .unwrap();
    // Five bytes a second: the whole body would take hours.
    let got = until_closed(&mut stream, |s| {
        let _ = s.write_all(b" ");
    });
    // The 408 can be lost to the reset that closing a socket with unread bytes sends.
    assert!(
        got.is_empty() || got.starts_with("HTTP/1.1 408"),
        "a 408 or nothing: {got:?}"
    );
}

#[test]
fn an_idle_kept_alive_connection_is_closed() {
    let server = server_with("--idle-timeout-secs", "1");
    let mut stream = connect(&server);
    let first = get_card(&mut stream);
    assert!(!first.to_ascii_lowercase().contains("connection: close"));
    assert_eq!(until_closed(&mut stream, |_| {}), "");
}

/// hyper's own header timer would close this connection (it starts as soon as a kept-alive
/// connection goes idle); the idle timeout applies between requests instead.
#[test]
fn between_requests_the_idle_timeout_applies_not_the_header_timeout() {
    let server = server_with("--header-timeout-secs", "1");
    let mut stream = connect(&server);
    get_card(&mut stream);
    // Three header timeouts, well inside the default idle timeout (60 s).
    std::thread::sleep(Duration::from_secs(3));
    get_card(&mut stream);
}

/// The header timeout also holds for a request that begins on a kept-alive connection: the
/// idle timeout (60 s by default, past [`WAIT`]) must not stand in for it.
#[test]
fn a_request_begun_after_an_idle_spell_has_the_header_timeout() {
    let server = server_with("--header-timeout-secs", "1");
    let mut stream = connect(&server);
    get_card(&mut stream);
    std::thread::sleep(Duration::from_millis(500));
    stream
        .write_all(b"GET /.well-known/agent-card.json HTTP/1.1\r\nHost: 12")
        .unwrap();
    assert_eq!(
        until_closed(&mut stream, |_| {}),
        "",
        "closed without an answer"
    );
}

#[test]
fn connections_past_the_cap_wait_until_one_closes() {
    let server = server_with("--max-connections", "1");
    let mut first = connect(&server);
    get_card(&mut first);

    // The first connection, kept alive, holds the only slot: the second is not served...
    let mut second = connect(&server);
    second.write_all(GET_CARD).unwrap();
    second
        .set_read_timeout(Some(Duration::from_secs(1)))
        .unwrap();
    let mut byte = [0u8; 1];
    match second.read(&mut byte) {
        Err(err) if timed_out(&err) => {}
        other => panic!("served past the cap: {other:?}"),
    }
    // ...until the first closes.
    drop(first);
    second.set_read_timeout(Some(POLL)).unwrap();
    let answer = read_response(&mut second);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_stream_quiet_for_longer_than_every_timeout_stays_open() {
    let server = Server::builder()
        .args(["--header-timeout-secs", "1"])
        .args(["--body-timeout-secs", "1"])
        .args(["--idle-timeout-secs", "1"])
        .start();
    let sender = server.client().api(Binding::JsonRpc);
    let task = sender.send_text("alice", "first").await;
    let id = id_of(&task);
    let watcher = server.client().fresh_connection().as_participant("alice");
    let mut events = watcher
        .api(Binding::Rest)
        .subscribe_get(id)
        .await
        .expect("subscribe");
    let first = events.next().await.expect("the task");
    assert_eq!(event_kind(&first), "task:TASK_STATE_INPUT_REQUIRED");

    // Nothing on the stream for three times each timeout...
    tokio::time::sleep(Duration::from_secs(3)).await;
    // ...and it still carries what a follow-up causes.
    sender.follow_up(&task, "alice", "second").await;
    let rest = events.collect().await;
    assert_eq!(
        event_kinds(&rest),
        [
            "status:TASK_STATE_WORKING",
            "status:TASK_STATE_INPUT_REQUIRED"
        ]
    );
}
