//! Fuzzes the reading of an upstream's streamed reply (server-sent events), fed in pieces cut
//! anywhere: whatever the upstream sends, the server must not panic, and the reply it puts
//! together must not depend on where the stream was cut.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strata_server::SseReply;

fuzz_target!(|data: &[u8]| {
    let Some((&cut, stream)) = data.split_first() else { return };
    let mut whole = SseReply::default();
    whole.feed(stream);
    let mut pieces = SseReply::default();
    for chunk in stream.chunks(usize::from(cut).max(1)) {
        pieces.feed(chunk);
    }
    assert_eq!(whole.finish(), pieces.finish(), "the reply depends on where the stream was cut");
});
