//! The PDF filters flate2 and weezl do not cover, as streaming readers: ASCIIHex, ASCII85
//! and RunLength are a few lines each of the PDF specification (§7.4.2, 7.4.3, 7.4.5);
//! LZW is weezl's decoder behind a reader. A malformed input ends the stream (what was
//! decoded so far still counts), as a renderer would stop there too.

use std::io::{self, Bytes, Read};

/// Reads one byte at a time from a layer below (each layer's input is the output of the
/// one below, already in memory-sized chunks).
struct Input<R: Read> {
    bytes: Bytes<io::BufReader<R>>,
}

impl<R: Read> Input<R> {
    fn new(inner: R) -> Self {
        Self {
            bytes: io::BufReader::new(inner).bytes(),
        }
    }

    fn next(&mut self) -> io::Result<Option<u8>> {
        self.bytes.next().transpose()
    }

    /// The next byte that is not PDF white space.
    fn next_dark(&mut self) -> io::Result<Option<u8>> {
        while let Some(b) = self.next()? {
            if !matches!(b, b' ' | b'\t' | b'\r' | b'\n' | b'\x0c' | b'\0') {
                return Ok(Some(b));
            }
        }
        Ok(None)
    }
}

/// Decoded bytes not yet handed out.
#[derive(Default)]
struct Pending {
    bytes: Vec<u8>,
    at: usize,
}

impl Pending {
    fn drain_into(&mut self, buf: &mut [u8]) -> usize {
        let n = buf.len().min(self.bytes.len() - self.at);
        buf[..n].copy_from_slice(&self.bytes[self.at..self.at + n]);
        self.at += n;
        n
    }

    fn is_empty(&self) -> bool {
        self.at == self.bytes.len()
    }
}

/// Implements `Read` for a decoder with `fill(&mut self, out: &mut Vec<u8>) -> io::Result<bool>`
/// (false at the end of its data).
macro_rules! reader {
    ($name:ident) => {
        impl<R: Read> Read for $name<R> {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                while self.pending.is_empty() {
                    if self.done || buf.is_empty() {
                        return Ok(0);
                    }
                    let mut out = std::mem::take(&mut self.pending.bytes);
                    out.clear();
                    self.pending.at = 0;
                    let more = self.fill(&mut out)?;
                    self.pending.bytes = out;
                    self.done = !more;
                }
                Ok(self.pending.drain_into(buf))
            }
        }
    };
}

/// `ASCIIHexDecode`: pairs of hex digits, white space ignored, `>` ends; a last odd
/// digit counts as followed by 0.
pub struct AsciiHex<R: Read> {
    input: Input<R>,
    pending: Pending,
    done: bool,
}

impl<R: Read> AsciiHex<R> {
    pub fn new(inner: R) -> Self {
        Self {
            input: Input::new(inner),
            pending: Pending::default(),
            done: false,
        }
    }

    fn fill(&mut self, out: &mut Vec<u8>) -> io::Result<bool> {
        let mut high = None;
        while out.len() < 4096 {
            let digit = match self.input.next_dark()? {
                None | Some(b'>') => {
                    out.extend(high.map(|h: u8| h << 4));
                    return Ok(false);
                }
                Some(b) => match (b as char).to_digit(16) {
                    Some(d) => d as u8,
                    None => return Ok(false),
                },
            };
            match high.take() {
                None => high = Some(digit),
                Some(h) => out.push(h << 4 | digit),
            }
        }
        out.extend(high.map(|h| h << 4));
        Ok(true)
    }
}

reader!(AsciiHex);

/// `ASCII85Decode`: groups of five characters `!`..`u` make four bytes, `z` four zeros,
/// `~>` ends; a last group of n characters makes n - 1 bytes.
pub struct Ascii85<R: Read> {
    input: Input<R>,
    pending: Pending,
    done: bool,
}

impl<R: Read> Ascii85<R> {
    pub fn new(inner: R) -> Self {
        Self {
            input: Input::new(inner),
            pending: Pending::default(),
            done: false,
        }
    }

    fn fill(&mut self, out: &mut Vec<u8>) -> io::Result<bool> {
        let mut group = [0u8; 5];
        let mut len = 0;
        // Stops between groups only, so no group is cut by the chunk size.
        while out.len() < 4096 || len > 0 {
            match self.input.next_dark()? {
                Some(b'z') if len == 0 => out.extend_from_slice(&[0; 4]),
                Some(b @ b'!'..=b'u') => {
                    group[len] = b - b'!';
                    len += 1;
                    if len == 5 {
                        out.extend_from_slice(&group_value(&group).to_be_bytes());
                        len = 0;
                    }
                }
                // `~` (the end), the end of the data, or a byte that does not belong.
                _ => {
                    if len > 1 {
                        let mut padded = [84u8; 5];
                        padded[..len].copy_from_slice(&group[..len]);
                        out.extend_from_slice(&group_value(&padded).to_be_bytes()[..len - 1]);
                    }
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }
}

fn group_value(group: &[u8; 5]) -> u32 {
    group.iter().fold(0u32, |value, &digit| {
        value.wrapping_mul(85).wrapping_add(u32::from(digit))
    })
}

reader!(Ascii85);

/// `RunLengthDecode`: a length byte n below 128 copies the next n + 1 bytes, above 128
/// repeats the next byte 257 - n times, 128 ends.
pub struct RunLength<R: Read> {
    input: Input<R>,
    pending: Pending,
    done: bool,
}

impl<R: Read> RunLength<R> {
    pub fn new(inner: R) -> Self {
        Self {
            input: Input::new(inner),
            pending: Pending::default(),
            done: false,
        }
    }

    fn fill(&mut self, out: &mut Vec<u8>) -> io::Result<bool> {
        while out.len() < 4096 {
            match self.input.next()? {
                None | Some(128) => return Ok(false),
                Some(n @ 0..=127) => {
                    for _ in 0..=n {
                        match self.input.next()? {
                            Some(b) => out.push(b),
                            None => return Ok(false),
                        }
                    }
                }
                Some(n) => match self.input.next()? {
                    Some(b) => out.extend(std::iter::repeat_n(b, 257 - usize::from(n))),
                    None => return Ok(false),
                },
            }
        }
        Ok(true)
    }
}

reader!(RunLength);

/// `LZWDecode` through weezl: most significant bit first, 8-bit symbols; `EarlyChange 1`
/// (the default) widens codes one code early, as TIFF does.
pub struct Lzw<R: Read> {
    inner: R,
    decoder: weezl::decode::Decoder,
    buffer: Vec<u8>,
    start: usize,
    end: usize,
    eof: bool,
    done: bool,
}

impl<R: Read> Lzw<R> {
    pub fn new(inner: R, early_change: bool) -> Self {
        let order = weezl::BitOrder::Msb;
        Self {
            inner,
            decoder: if early_change {
                weezl::decode::Decoder::with_tiff_size_switch(order, 8)
            } else {
                weezl::decode::Decoder::new(order, 8)
            },
            buffer: vec![0; 8192],
            start: 0,
            end: 0,
            eof: false,
            done: false,
        }
    }
}

impl<R: Read> Read for Lzw<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while !self.done && !buf.is_empty() {
            if self.start == self.end && !self.eof {
                self.end = self.inner.read(&mut self.buffer)?;
                self.start = 0;
                self.eof = self.end == 0;
            }
            let result = self
                .decoder
                .decode_bytes(&self.buffer[self.start..self.end], buf);
            self.start += result.consumed_in;
            match result.status {
                Ok(weezl::LzwStatus::Done) | Err(_) => self.done = true,
                Ok(_) if result.consumed_out == 0 && result.consumed_in == 0 && self.eof => {
                    self.done = true
                }
                Ok(_) => {}
            }
            if result.consumed_out > 0 {
                return Ok(result.consumed_out);
            }
        }
        Ok(0)
    }
}
