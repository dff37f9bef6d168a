//! Refuses PDF decompression bombs before any tool parses the file. Each stream's filter
//! chain (`/Filter /FlateDecode`, or an array such as `[/ASCIIHexDecode /FlateDecode]`)
//! is decoded layer by layer, each layer streaming into the next and the last into a
//! counter (nothing is kept); every byte any layer produces counts against one budget for
//! the whole file, and the file is refused once it is spent. Cheap for honest files,
//! bounded for hostile ones: decoding stops at the limit, however many layers hide a bomb.
//!
//! The stream dictionaries are read by a small tokenizer that knows strings, comments and
//! nesting, so a `>>` or `stream` inside a string cannot hide a dictionary. What the guard
//! cannot judge it refuses ([`Verdict::Unsupported`]): a filter it does not know (a
//! renderer that knows it could expand it), a filter entry it cannot read (an indirect
//! reference), a predictor between two layers, a nesting deeper than any honest file's.
//! Image codecs (DCT, JPX, CCITT, JBIG2) end a chain: their output is pixels, which the
//! tools' memory limits bound.

use std::cell::Cell;
use std::io::Read;
use std::rc::Rc;

mod decoders;

/// What the guard found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Every stream decodes within the limit.
    Fits,
    /// The streams decode to more than the limit.
    Bomb,
    /// A stream the guard cannot judge; the file is refused rather than trusted.
    Unsupported,
}

/// Deeper nesting than this in a dictionary or array is refused (honest files nest a
/// handful of levels; the tokenizer must not recurse without bound).
const MAX_DEPTH: usize = 32;

/// One decoding layer of a chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Filter {
    Flate,
    Lzw {
        early_change: bool,
    },
    AsciiHex,
    Ascii85,
    RunLength,
    /// Identity here; an encrypted file is refused before this guard matters.
    Crypt,
    /// An image codec: decoding stops here, it must be the last layer.
    Image,
}

fn filter_named(name: &[u8]) -> Option<Filter> {
    Some(match name {
        b"FlateDecode" | b"Fl" => Filter::Flate,
        b"LZWDecode" | b"LZW" => Filter::Lzw { early_change: true },
        b"ASCIIHexDecode" | b"AHx" => Filter::AsciiHex,
        b"ASCII85Decode" | b"A85" => Filter::Ascii85,
        b"RunLengthDecode" | b"RL" => Filter::RunLength,
        b"Crypt" => Filter::Crypt,
        b"DCTDecode" | b"DCT" | b"JPXDecode" | b"CCITTFaxDecode" | b"CCF" | b"JBIG2Decode" => {
            Filter::Image
        }
        _ => return None,
    })
}

/// A parsed PDF value, as far as the guard needs one.
#[derive(Debug, Clone, PartialEq)]
enum Value {
    Name(Vec<u8>),
    Int(i64),
    Ref,
    Array(Vec<Value>),
    Dict(Vec<(Vec<u8>, Value)>),
    Other,
}

impl Value {
    fn get(&self, key: &[u8]) -> Option<&Value> {
        match self {
            Value::Dict(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    DictStart,
    DictEnd,
    ArrayStart,
    ArrayEnd,
    Name(Vec<u8>),
    Int(i64),
    Keyword(Vec<u8>),
    /// A string, a real number, anything else that is one value.
    Atom,
}

fn is_white(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n' | b'\x0c' | b'\0')
}

fn is_delimiter(b: u8) -> bool {
    matches!(
        b,
        b'(' | b')' | b'<' | b'>' | b'[' | b']' | b'{' | b'}' | b'/' | b'%'
    )
}

struct Lexer<'a> {
    pdf: &'a [u8],
    pos: usize,
    /// A value nested deeper than [`MAX_DEPTH`] was met.
    too_deep: bool,
}

impl<'a> Lexer<'a> {
    fn peek_byte(&self) -> Option<u8> {
        self.pdf.get(self.pos).copied()
    }

    fn skip_white_and_comments(&mut self) {
        while let Some(b) = self.peek_byte() {
            if is_white(b) {
                self.pos += 1;
            } else if b == b'%' {
                while let Some(b) = self.peek_byte() {
                    if b == b'\r' || b == b'\n' {
                        break;
                    }
                    self.pos += 1;
                }
            } else {
                break;
            }
        }
    }

    /// Skips a literal string (balanced parentheses, backslash escapes).
    fn skip_string(&mut self) {
        let mut depth = 0usize;
        while let Some(b) = self.peek_byte() {
            self.pos += 1;
            match b {
                b'\\' => self.pos += 1,
                b'(' => depth += 1,
                b')' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        return;
                    }
                }
                _ => {}
            }
        }
    }

    fn regular(&mut self) -> &'a [u8] {
        let start = self.pos;
        while let Some(b) = self.peek_byte() {
            if is_white(b) || is_delimiter(b) {
                break;
            }
            self.pos += 1;
        }
        &self.pdf[start..self.pos]
    }

    fn next(&mut self) -> Option<Token> {
        self.skip_white_and_comments();
        let b = self.peek_byte()?;
        Some(match b {
            b'(' => {
                self.skip_string();
                Token::Atom
            }
            b'<' if self.pdf.get(self.pos + 1) == Some(&b'<') => {
                self.pos += 2;
                Token::DictStart
            }
            b'<' => {
                // A hex string.
                while let Some(b) = self.peek_byte() {
                    self.pos += 1;
                    if b == b'>' {
                        break;
                    }
                }
                Token::Atom
            }
            b'>' if self.pdf.get(self.pos + 1) == Some(&b'>') => {
                self.pos += 2;
                Token::DictEnd
            }
            b'[' => {
                self.pos += 1;
                Token::ArrayStart
            }
            b']' => {
                self.pos += 1;
                Token::ArrayEnd
            }
            b'/' => {
                self.pos += 1;
                Token::Name(decode_name(self.regular()))
            }
            _ if is_delimiter(b) => {
                self.pos += 1;
                Token::Atom
            }
            _ => {
                let word = self.regular();
                match std::str::from_utf8(word).ok().and_then(|w| w.parse().ok()) {
                    Some(int) => Token::Int(int),
                    None if word.iter().all(|b| b.is_ascii_alphabetic()) => {
                        Token::Keyword(word.to_vec())
                    }
                    None => Token::Atom,
                }
            }
        })
    }

    /// The value that starts with `first`; `None` when nesting is too deep (then
    /// `too_deep` is set) or the file ends inside it.
    fn value(&mut self, first: Token, depth: usize) -> Option<Value> {
        if depth > MAX_DEPTH {
            self.too_deep = true;
            return None;
        }
        Some(match first {
            Token::DictStart => {
                let mut entries = Vec::new();
                loop {
                    match self.next()? {
                        Token::DictEnd => break,
                        Token::Name(key) => {
                            let first = self.next()?;
                            let value = self.value_or_ref(first, depth + 1)?;
                            entries.push((key, value));
                        }
                        // Malformed: skip the token and read on.
                        _ => {}
                    }
                }
                Value::Dict(entries)
            }
            Token::ArrayStart => {
                let mut items = Vec::new();
                let mut pending = self.next()?;
                loop {
                    if pending == Token::ArrayEnd {
                        break;
                    }
                    let item = self.value(pending, depth + 1)?;
                    pending = self.next()?;
                    // `n g R` inside an array.
                    if let (Value::Int(_), Token::Int(_)) = (&item, &pending) {
                        let save = self.pos;
                        if self.next() == Some(Token::Keyword(b"R".to_vec())) {
                            items.push(Value::Ref);
                            pending = self.next()?;
                            continue;
                        }
                        self.pos = save;
                    }
                    items.push(item);
                }
                Value::Array(items)
            }
            Token::Name(name) => Value::Name(name),
            Token::Int(int) => Value::Int(int),
            _ => Value::Other,
        })
    }

    /// A dictionary entry's value: like [`Self::value`], with `n g R` read as a reference.
    fn value_or_ref(&mut self, first: Token, depth: usize) -> Option<Value> {
        let value = self.value(first, depth)?;
        if let Value::Int(_) = value {
            let save = self.pos;
            if let Some(Token::Int(_)) = self.next()
                && self.next() == Some(Token::Keyword(b"R".to_vec()))
            {
                return Some(Value::Ref);
            }
            self.pos = save;
        }
        Some(value)
    }
}

/// A name with its `#xx` escapes decoded (`/Flate#44ecode` is `/FlateDecode`).
fn decode_name(raw: &[u8]) -> Vec<u8> {
    let mut name = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        if raw[i] == b'#'
            && let Some(byte) = raw
                .get(i + 1..i + 3)
                .and_then(|hex| std::str::from_utf8(hex).ok())
                .and_then(|hex| u8::from_str_radix(hex, 16).ok())
        {
            name.push(byte);
            i += 3;
            continue;
        }
        name.push(raw[i]);
        i += 1;
    }
    name
}

fn find(haystack: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    haystack
        .get(from..)?
        .windows(needle.len())
        .position(|window| window == needle)
        .map(|index| index + from)
}

/// A stream's dictionary and its encoded bytes.
struct Stream<'a> {
    dict: Value,
    body: &'a [u8],
}

/// Every `<< … >> stream … endstream` of the file, in order; `Err` when one cannot be
/// read safely.
fn streams(pdf: &[u8]) -> Result<Vec<Stream<'_>>, ()> {
    let mut lexer = Lexer {
        pdf,
        pos: 0,
        too_deep: false,
    };
    let mut found = Vec::new();
    while let Some(token) = lexer.next() {
        if token != Token::DictStart {
            continue;
        }
        let Some(dict) = lexer.value(Token::DictStart, 0) else {
            // The file ends inside a dictionary: no stream follows it.
            return if lexer.too_deep { Err(()) } else { Ok(found) };
        };
        let save = lexer.pos;
        if lexer.next() != Some(Token::Keyword(b"stream".to_vec())) {
            lexer.pos = save;
            continue;
        }
        let mut body = lexer.pos;
        if pdf.get(body) == Some(&b'\r') {
            body += 1;
        }
        if pdf.get(body) == Some(&b'\n') {
            body += 1;
        }
        let found_end = find(pdf, b"endstream", body).unwrap_or(pdf.len());
        // A renderer reads `/Length` bytes when the length is given directly: a fake
        // `endstream` early in the body must not cut the guard's look short.
        let declared_end = match dict.get(b"Length") {
            Some(Value::Int(length)) => usize::try_from(*length)
                .ok()
                .and_then(|length| body.checked_add(length))
                .map(|end| end.min(pdf.len())),
            _ => None,
        };
        let end = declared_end.map_or(found_end, |declared| declared.max(found_end));
        found.push(Stream {
            dict,
            body: &pdf[body..end],
        });
        lexer.pos = found_end;
    }
    Ok(found)
}

/// The stream's filter chain, outermost encoding first (the order they are decoded in);
/// `None` when the guard cannot judge it.
fn chain(dict: &Value) -> Option<Vec<Filter>> {
    let names: Vec<&[u8]> = match dict.get(b"Filter") {
        None => return Some(Vec::new()),
        Some(Value::Name(name)) => vec![name.as_slice()],
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| match item {
                Value::Name(name) => Some(name.as_slice()),
                _ => None,
            })
            .collect::<Option<_>>()?,
        Some(_) => return None,
    };
    let lzw = names
        .iter()
        .any(|name| matches!(filter_named(name), Some(Filter::Lzw { .. })));
    let params: Vec<Option<&Value>> = match dict.get(b"DecodeParms") {
        None => vec![None; names.len()],
        // Unread parameters matter only between layers (a predictor) or to LZW (its
        // code width); a single other layer decodes the same without them.
        Some(Value::Ref) if names.len() == 1 && !lzw => vec![None],
        Some(dict @ Value::Dict(_)) if names.len() == 1 => vec![Some(dict)],
        Some(Value::Array(items)) if items.len() == names.len() => items
            .iter()
            .map(|item| match item {
                Value::Dict(_) => Some(Some(item)),
                Value::Other => Some(None), // null
                _ => None,
            })
            .collect::<Option<_>>()?,
        Some(_) => return None,
    };
    let last = names.len().saturating_sub(1);
    let mut filters = Vec::with_capacity(names.len());
    for (index, (name, params)) in names.iter().zip(params).enumerate() {
        let mut filter = filter_named(name)?;
        if filter == Filter::Image && index != last {
            return None;
        }
        if let Some(params) = params {
            // A predictor changes the bytes the next layer would get; the guard does not
            // undo predictors, so it cannot follow a chain past one.
            let predicted = matches!(params.get(b"Predictor"), Some(Value::Int(p)) if *p > 1);
            if predicted && index != last {
                return None;
            }
            if let (Filter::Lzw { .. }, Some(Value::Int(0))) = (filter, params.get(b"EarlyChange"))
            {
                filter = Filter::Lzw {
                    early_change: false,
                };
            }
        }
        filters.push(filter);
    }
    Some(filters)
}

/// Every byte read through it counts against the shared budget; past the budget, reading
/// fails and so stops the whole chain.
struct Counted<R> {
    inner: R,
    used: Rc<Cell<u64>>,
    limit: u64,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let read = self.inner.read(buf)?;
        let used = self.used.get().saturating_add(read as u64);
        self.used.set(used);
        if used > self.limit {
            return Err(std::io::Error::other("over the decoding budget"));
        }
        Ok(read)
    }
}

/// What the whole file decodes to, judged against `limit` bytes.
pub fn check(pdf: &[u8], limit: u64) -> Verdict {
    let Ok(streams) = streams(pdf) else {
        return Verdict::Unsupported;
    };
    let used = Rc::new(Cell::new(0u64));
    for stream in streams {
        let Some(filters) = chain(&stream.dict) else {
            return Verdict::Unsupported;
        };
        let mut reader: Box<dyn Read + '_> = Box::new(stream.body);
        let mut layers = 0;
        for filter in filters {
            let decoded: Box<dyn Read + '_> = match filter {
                Filter::Flate => Box::new(flate2::read::ZlibDecoder::new(reader)),
                Filter::Lzw { early_change } => Box::new(decoders::Lzw::new(reader, early_change)),
                Filter::AsciiHex => Box::new(decoders::AsciiHex::new(reader)),
                Filter::Ascii85 => Box::new(decoders::Ascii85::new(reader)),
                Filter::RunLength => Box::new(decoders::RunLength::new(reader)),
                Filter::Crypt => continue,
                Filter::Image => break,
            };
            reader = Box::new(Counted {
                inner: decoded,
                used: Rc::clone(&used),
                limit,
            });
            layers += 1;
        }
        if layers > 0 {
            // A damaged layer ends its stream; what it produced still counts.
            let _ = std::io::copy(&mut reader, &mut std::io::sink());
        }
        if used.get() > limit {
            return Verdict::Bomb;
        }
    }
    Verdict::Fits
}

#[cfg(test)]
mod tests;
