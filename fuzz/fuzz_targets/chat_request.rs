//! Fuzzes what a client sends the memory server: the chat request body and the conversation
//! header. A bad request must be an error (a 4xx naming its field), never a panic, and a
//! conversation id the server accepts must be safe to use as a name anywhere.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strata_server::api::{conversation_id, parse_chat};

fuzz_target!(|data: &[u8]| {
    // The header, up to the first NUL (none without one), then the body.
    let (header, body) = match data.iter().position(|&b| b == 0) {
        Some(at) => (Some(String::from_utf8_lossy(&data[..at]).into_owned()), &data[at + 1..]),
        None => (None, data),
    };
    let Ok(request) = parse_chat(body) else { return };
    assert!(!request.turns.is_empty(), "a request without messages was accepted");
    if let Ok(id) = conversation_id(header.as_deref(), &request) {
        assert!(!id.is_empty() && id.len() <= 128, "conversation id of {} bytes", id.len());
        assert!(
            id.chars().all(|c| c.is_ascii_alphanumeric() || "._:@-".contains(c)) && id != "." && id != "..",
            "conversation id {id:?} is not a plain name"
        );
    }
});
