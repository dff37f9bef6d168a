use std::io::Write;

use super::*;

const MIB: usize = 1024 * 1024;

fn deflated(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(bytes).expect("compress");
    encoder.finish().expect("finish")
}

fn hex(bytes: &[u8]) -> Vec<u8> {
    let mut out = hex::encode_upper(bytes).into_bytes();
    out.push(b'>');
    out
}

fn ascii85(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for chunk in bytes.chunks(4) {
        let mut group = [0u8; 4];
        group[..chunk.len()].copy_from_slice(chunk);
        let mut value = u32::from_be_bytes(group);
        if value == 0 && chunk.len() == 4 {
            out.push(b'z');
            continue;
        }
        let mut digits = [0u8; 5];
        for digit in digits.iter_mut().rev() {
            *digit = (value % 85) as u8 + b'!';
            value /= 85;
        }
        out.extend_from_slice(&digits[..chunk.len() + 1]);
    }
    out.extend_from_slice(b"~>");
    out
}

fn run_length(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for run in bytes.chunk_by(|a, b| a == b) {
        for piece in run.chunks(128) {
            if piece.len() == 1 {
                out.extend_from_slice(&[0, piece[0]]);
            } else {
                out.extend_from_slice(&[(257 - piece.len()) as u8, piece[0]]);
            }
        }
    }
    out.push(128);
    out
}

fn lzw(bytes: &[u8]) -> Vec<u8> {
    weezl::encode::Encoder::with_tiff_size_switch(weezl::BitOrder::Msb, 8)
        .encode(bytes)
        .expect("lzw")
}

fn pdf(dict: &str, body: &[u8]) -> Vec<u8> {
    let mut pdf = format!("%PDF-1.4\n1 0 obj\n{dict}\nstream\n").into_bytes();
    pdf.extend_from_slice(body);
    pdf.extend_from_slice(b"\nendstream\nendobj\n%%EOF\n");
    pdf
}

fn bomb() -> Vec<u8> {
    vec![b' '; 8 * MIB]
}

const LIMIT: u64 = MIB as u64;

#[test]
fn honest_streams_pass_and_bombs_are_caught() {
    let honest = pdf(
        "<< /Filter /FlateDecode >>",
        &deflated(b"BT /F1 12 Tf (hello) Tj ET"),
    );
    assert_eq!(check(&honest, 1024), Verdict::Fits);
    let bomb = pdf("<< /Filter /FlateDecode >>", &deflated(&bomb()));
    assert!(bomb.len() < 64 * 1024, "a small file");
    assert_eq!(check(&bomb, LIMIT), Verdict::Bomb);
    assert_eq!(check(&bomb, 16 * LIMIT), Verdict::Fits);
}

#[test]
fn a_bomb_under_two_flate_layers_is_caught() {
    let twice = deflated(&deflated(&bomb()));
    let file = pdf("<< /Filter [/FlateDecode /FlateDecode] >>", &twice);
    assert!(file.len() < 4 * 1024, "a tiny file: {}", file.len());
    assert_eq!(check(&file, LIMIT), Verdict::Bomb);
}

#[test]
fn a_bomb_under_ascii_hex_or_ascii85_is_caught() {
    let hexed = pdf(
        "<< /Length 999999 /Filter [/ASCIIHexDecode /FlateDecode] >>",
        &hex(&deflated(&bomb())),
    );
    assert_eq!(check(&hexed, LIMIT), Verdict::Bomb);
    let a85 = pdf("<< /Filter [/A85 /Fl] >>", &ascii85(&deflated(&bomb())));
    assert_eq!(check(&a85, LIMIT), Verdict::Bomb);
}

#[test]
fn lzw_and_run_length_bombs_are_caught() {
    let file = pdf("<< /Filter /LZWDecode >>", &lzw(&bomb()));
    assert_eq!(check(&file, LIMIT), Verdict::Bomb);
    let file = pdf(
        "<< /Filter [/FlateDecode /RunLengthDecode] >>",
        &deflated(&run_length(&bomb())),
    );
    assert_eq!(check(&file, LIMIT), Verdict::Bomb);
}

#[test]
fn every_decoder_reads_back_what_its_encoder_wrote() {
    let text: Vec<u8> = (0..20_000u32)
        .map(|i| (i % 251) as u8)
        .chain(bomb().into_iter().take(5000))
        .collect();
    for (dict, body) in [
        ("<< /Filter /ASCIIHexDecode >>", hex(&text)),
        ("<< /Filter /ASCII85Decode >>", ascii85(&text)),
        ("<< /Filter /RunLengthDecode >>", run_length(&text)),
        ("<< /Filter /LZWDecode >>", lzw(&text)),
        ("<< /Filter /FlateDecode >>", deflated(&text)),
    ] {
        let file = pdf(dict, &body);
        let exact = text.len() as u64;
        assert_eq!(check(&file, exact), Verdict::Fits, "{dict}");
        assert_eq!(check(&file, exact - 1), Verdict::Bomb, "{dict}");
    }
}

#[test]
fn an_honest_two_layer_stream_fits() {
    let file = pdf(
        "<< /Filter [/ASCII85Decode /FlateDecode] /DecodeParms [null << /Predictor 12 /Columns 4 >>] >>",
        &ascii85(&deflated(b"BT /F1 12 Tf (hello) Tj ET")),
    );
    assert_eq!(check(&file, 1024), Verdict::Fits);
}

#[test]
fn what_the_guard_cannot_judge_is_refused() {
    for dict in [
        "<< /Filter /BrotliDecode >>",
        "<< /Filter 5 0 R >>",
        "<< /Filter [/FlateDecode 5 0 R] >>",
        "<< /Filter [/DCTDecode /FlateDecode] >>",
        "<< /Filter [/FlateDecode /FlateDecode] /DecodeParms [<< /Predictor 12 >> null] >>",
        "<< /Filter [/FlateDecode /FlateDecode] /DecodeParms 7 0 R >>",
    ] {
        let file = pdf(dict, &deflated(b"x"));
        assert_eq!(check(&file, LIMIT), Verdict::Unsupported, "{dict}");
    }
    let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    let file = pdf(&format!("<< /Filter /FlateDecode /X {deep} >>"), b"");
    assert_eq!(check(&file, LIMIT), Verdict::Unsupported, "too deep");
}

#[test]
fn strings_and_comments_cannot_hide_a_dictionary() {
    let twice = deflated(&deflated(&bomb()));
    let file = pdf(
        "<< /Note (a >> stream \\) ( nested ) ) % >> stream\n /Filter [/Flate#44ecode /FlateDecode] >>",
        &twice,
    );
    assert_eq!(check(&file, LIMIT), Verdict::Bomb);
}

#[test]
fn image_codecs_end_a_chain_and_garbage_is_not_a_bomb() {
    let file = pdf(
        "<< /Filter [/FlateDecode /DCTDecode] >>",
        &deflated(b"jpeg bytes"),
    );
    assert_eq!(check(&file, LIMIT), Verdict::Fits);
    assert_eq!(
        check(b"%PDF-1.4 stream \x00\x01garbage endstream", 10),
        Verdict::Fits
    );
    assert_eq!(check(b"no streams at all", 10), Verdict::Fits);
    assert_eq!(
        check(&pdf("<< /Filter /FlateDecode >>", b"\x00\x01 not zlib"), 10),
        Verdict::Fits
    );
    assert_eq!(check(b"%PDF-1.4 1 0 obj << /Filter /Fl", 10), Verdict::Fits);
}
