//! Content hashes as lowercase hex: the one place that writes them, for the model pins, the
//! dataset manifest, the generation cache's keys and the server's conversation keys.

use sha2::{Digest, Sha256};

/// `bytes` as lowercase hex, two digits a byte.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The sha256 of everything `reader` yields, as lowercase hex; read in pieces, so a file of
/// gigabytes is never in memory whole.
pub fn sha256_hex(mut reader: impl std::io::Read) -> std::io::Result<String> {
    let mut h = Sha256::new();
    std::io::copy(&mut reader, &mut h)?;
    Ok(hex(&h.finalize()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn sha256_of_known_inputs() {
        // FIPS 180-2's examples.
        assert_eq!(
            super::sha256_hex(&b"abc"[..]).unwrap(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            super::sha256_hex(&b""[..]).unwrap(),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(super::hex(&[0, 15, 255]), "000fff");
    }
}
