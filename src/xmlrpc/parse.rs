//! Reading XML-RPC calls and responses from every client in the graph.
//!
//! Not a strict XML 1.0 parser, on purpose: roscpp can put a NUL inside `<base64>`,
//! strings may be untyped (`<value>text</value>`), numeric character references and
//! self-closing tags may appear. Nothing panics.
//!
//! The parser pulls XML events one at a time and builds the value as it goes: element
//! names become a small enum (never an owned string per tag) and text is borrowed from the
//! body unless references must be resolved, so memory follows the decoded value, not the
//! token count. A document stops being read at the first element that is not XML-RPC, and
//! the number of values and the nesting depth are budgeted: a body of a million tiny
//! elements costs what its first wrong element costs, or one bounded value tree.
//!
//! One file, past 500 lines, on purpose: the budgets, the tolerated deviations and the value
//! builder share one pull loop; split, each would hide what the others allow.

use super::base64::decode_base64;
use super::{Fault, MethodCall, Value};
use quick_xml::events::Event;
use quick_xml::Reader;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

/// Bounds on one document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParseLimits {
    /// Largest body, in bytes.
    pub max_body: usize,
    /// Deepest nesting of arrays and structs.
    pub max_depth: usize,
    /// Most values (every `<value>`, at any depth) in one document. A decoded value costs
    /// 32 bytes and more, so this bounds the memory a document can make the reader commit.
    pub max_values: usize,
}

impl ParseLimits {
    /// What a server accepts from anyone who connects: 16 MiB, 500,000 values (a
    /// 50,000-entry parameter dict is a 3.6 MB body of 50,000 values).
    pub const SERVER: ParseLimits = ParseLimits {
        max_body: 16 << 20,
        max_depth: 64,
        max_values: 500_000,
    };

    /// What a client accepts in an answer from the server it chose to call: a parameter
    /// tree dumped by another master may be larger than what we accept from strangers.
    pub const CLIENT: ParseLimits = ParseLimits {
        max_body: 64 << 20,
        max_depth: 64,
        max_values: 4_000_000,
    };
}

impl Default for ParseLimits {
    fn default() -> Self {
        ParseLimits::SERVER
    }
}

/// Why a document is not an XML-RPC call or response within the limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParseError {
    /// The document exceeds a size or value budget of this many.
    TooLarge(usize),
    /// Values nest deeper than the limit.
    TooDeep,
    /// More values than [`ParseLimits::max_values`].
    TooManyValues(usize),
    /// The XML is not well formed enough to read.
    Xml(String),
    /// Well-formed XML that is not XML-RPC.
    Structure(String),
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::TooLarge(n) => write!(f, "XML-RPC body of {n} bytes is too large"),
            ParseError::TooDeep => f.write_str("XML-RPC value nests too deeply"),
            ParseError::TooManyValues(n) => {
                write!(f, "XML-RPC document holds more than {n} values")
            }
            ParseError::Xml(e) => write!(f, "malformed XML: {e}"),
            ParseError::Structure(e) => write!(f, "not XML-RPC: {e}"),
        }
    }
}

impl std::error::Error for ParseError {}

/// The element names XML-RPC uses; anything else is `Other`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tag {
    MethodCall,
    MethodName,
    MethodResponse,
    Params,
    Param,
    Fault,
    Value,
    Array,
    Data,
    Struct,
    Member,
    Name,
    I4,
    Int,
    I8,
    Boolean,
    String,
    Double,
    DateTime,
    Base64,
    Other,
}

impl Tag {
    /// The element's name as written, for error messages.
    fn name(self) -> &'static str {
        match self {
            Tag::MethodCall => "methodCall",
            Tag::MethodName => "methodName",
            Tag::MethodResponse => "methodResponse",
            Tag::Params => "params",
            Tag::Param => "param",
            Tag::Fault => "fault",
            Tag::Value => "value",
            Tag::Array => "array",
            Tag::Data => "data",
            Tag::Struct => "struct",
            Tag::Member => "member",
            Tag::Name => "name",
            Tag::I4 => "i4",
            Tag::Int => "int",
            Tag::I8 => "i8",
            Tag::Boolean => "boolean",
            Tag::String => "string",
            Tag::Double => "double",
            Tag::DateTime => "dateTime.iso8601",
            Tag::Base64 => "base64",
            Tag::Other => "an unknown element",
        }
    }

    fn of(name: &[u8]) -> Tag {
        match name {
            b"methodCall" => Tag::MethodCall,
            b"methodName" => Tag::MethodName,
            b"methodResponse" => Tag::MethodResponse,
            b"params" => Tag::Params,
            b"param" => Tag::Param,
            b"fault" => Tag::Fault,
            b"value" => Tag::Value,
            b"array" => Tag::Array,
            b"data" => Tag::Data,
            b"struct" => Tag::Struct,
            b"member" => Tag::Member,
            b"name" => Tag::Name,
            b"i4" => Tag::I4,
            b"int" => Tag::Int,
            b"i8" => Tag::I8,
            b"boolean" => Tag::Boolean,
            b"string" => Tag::String,
            b"double" => Tag::Double,
            b"dateTime.iso8601" => Tag::DateTime,
            b"base64" => Tag::Base64,
            _ => Tag::Other,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Token<'a> {
    Open(Tag),
    Close(Tag),
    Text(Cow<'a, [u8]>),
    Eof,
}

/// XML events as tokens, pulled on demand with one token of look-ahead. Adjacent text,
/// CDATA and references merge into one text token.
struct Tokens<'a> {
    reader: Reader<&'a [u8]>,
    peeked: Option<Token<'a>>,
    /// A structural token read while collecting text, returned after it.
    pending: Option<Token<'a>>,
}

impl<'a> Tokens<'a> {
    fn new(body: &'a [u8]) -> Tokens<'a> {
        let mut reader = Reader::from_reader(body);
        let config = reader.config_mut();
        config.expand_empty_elements = true;
        config.check_end_names = false;
        config.trim_text(false);
        Tokens {
            reader,
            peeked: None,
            pending: None,
        }
    }

    fn position(&self) -> u64 {
        self.reader.buffer_position()
    }

    fn read(&mut self) -> Result<Token<'a>, ParseError> {
        if let Some(token) = self.pending.take() {
            return Ok(token);
        }
        let mut text: Option<Cow<'a, [u8]>> = None;
        loop {
            let event = self
                .reader
                .read_event()
                .map_err(|e| ParseError::Xml(e.to_string()))?;
            let piece: Cow<'a, [u8]> = match event {
                Event::Text(t) => t.into_inner(),
                Event::CData(c) => c.into_inner(),
                Event::GeneralRef(r) => Cow::Owned(resolve_reference(&r.into_inner())),
                Event::Start(e) => {
                    let token = Token::Open(Tag::of(e.local_name().as_ref()));
                    return Ok(self.after_text(text, token));
                }
                Event::End(e) => {
                    let token = Token::Close(Tag::of(e.local_name().as_ref()));
                    return Ok(self.after_text(text, token));
                }
                Event::Eof => return Ok(self.after_text(text, Token::Eof)),
                _ => continue, // declarations, comments, processing instructions
            };
            text = Some(match text {
                None => piece,
                Some(mut so_far) => {
                    so_far.to_mut().extend_from_slice(&piece);
                    so_far
                }
            });
        }
    }

    /// Returns collected text first, keeping `token` for the next read.
    fn after_text(&mut self, text: Option<Cow<'a, [u8]>>, token: Token<'a>) -> Token<'a> {
        match text {
            Some(text) => {
                self.pending = Some(token);
                Token::Text(text)
            }
            None => token,
        }
    }

    fn peek(&mut self) -> Result<&Token<'a>, ParseError> {
        if self.peeked.is_none() {
            self.peeked = Some(self.read()?);
        }
        Ok(self.peeked.get_or_insert(Token::Eof))
    }

    fn next(&mut self) -> Result<Token<'a>, ParseError> {
        match self.peeked.take() {
            Some(token) => Ok(token),
            None => self.read(),
        }
    }
}

/// `&name;` or `&#N;` / `&#xN;` as bytes; unknown entities stay as written.
fn resolve_reference(name: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(name);
    let resolved = match text.as_ref() {
        "lt" => Some('<'),
        "gt" => Some('>'),
        "amp" => Some('&'),
        "apos" => Some('\''),
        "quot" => Some('"'),
        t => t.strip_prefix('#').and_then(|n| {
            let code = match n.strip_prefix(['x', 'X']) {
                Some(hex) => u32::from_str_radix(hex, 16).ok(),
                None => n.parse().ok(),
            };
            code.and_then(char::from_u32)
        }),
    };
    match resolved {
        Some(c) => c.to_string().into_bytes(),
        None => format!("&{text};").into_bytes(),
    }
}

fn is_blank(text: &[u8]) -> bool {
    text.iter().all(u8::is_ascii_whitespace)
}

fn lossy(bytes: Cow<'_, [u8]>) -> String {
    match bytes {
        Cow::Borrowed(b) => String::from_utf8_lossy(b).into_owned(),
        Cow::Owned(b) => String::from_utf8(b)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
    }
}

struct Cursor<'a> {
    tokens: Tokens<'a>,
    limits: ParseLimits,
    values: usize,
}

impl<'a> Cursor<'a> {
    fn new(body: &'a [u8], limits: &ParseLimits) -> Result<Cursor<'a>, ParseError> {
        if body.len() > limits.max_body {
            return Err(ParseError::TooLarge(body.len()));
        }
        Ok(Cursor {
            tokens: Tokens::new(body),
            limits: *limits,
            values: 0,
        })
    }

    fn structure<T>(&self, what: &str) -> Result<T, ParseError> {
        Err(ParseError::Structure(format!(
            "{what} (at byte {})",
            self.tokens.position()
        )))
    }

    fn skip_whitespace(&mut self) -> Result<(), ParseError> {
        while matches!(self.tokens.peek()?, Token::Text(t) if is_blank(t)) {
            self.tokens.next()?;
        }
        Ok(())
    }

    fn peek_open(&mut self) -> Result<Option<Tag>, ParseError> {
        self.skip_whitespace()?;
        Ok(match self.tokens.peek()? {
            Token::Open(tag) => Some(*tag),
            _ => None,
        })
    }

    fn open(&mut self, tag: Tag) -> Result<(), ParseError> {
        if self.peek_open()? == Some(tag) {
            self.tokens.next()?;
            Ok(())
        } else {
            self.structure(&format!("expected <{}>", tag.name()))
        }
    }

    fn at_close(&mut self, tag: Tag) -> Result<bool, ParseError> {
        self.skip_whitespace()?;
        Ok(*self.tokens.peek()? == Token::Close(tag))
    }

    fn close(&mut self, tag: Tag) -> Result<(), ParseError> {
        if self.at_close(tag)? {
            self.tokens.next()?;
            Ok(())
        } else {
            self.structure(&format!("expected </{}>", tag.name()))
        }
    }

    /// The text of an element whose open tag was consumed, up to its close tag.
    fn text_until_close(&mut self, tag: Tag) -> Result<Cow<'a, [u8]>, ParseError> {
        let text = match self.tokens.peek()? {
            Token::Text(_) => match self.tokens.next()? {
                Token::Text(t) => t,
                _ => Cow::Borrowed(&[][..]),
            },
            _ => Cow::Borrowed(&[][..]),
        };
        if *self.tokens.peek()? == Token::Close(tag) {
            self.tokens.next()?;
            Ok(text)
        } else {
            self.structure(&format!("expected text then </{}>", tag.name()))
        }
    }

    fn count_value(&mut self) -> Result<(), ParseError> {
        self.values += 1;
        if self.values > self.limits.max_values {
            return Err(ParseError::TooManyValues(self.limits.max_values));
        }
        Ok(())
    }

    /// A `<value>` element, open tag included.
    fn value(&mut self, depth: usize) -> Result<Value, ParseError> {
        if depth > self.limits.max_depth {
            return Err(ParseError::TooDeep);
        }
        self.open(Tag::Value)?;
        self.count_value()?;
        // Untyped: text (possibly empty) straight up to </value> is a string.
        if let Token::Text(_) = self.tokens.peek()? {
            let Token::Text(text) = self.tokens.next()? else {
                return self.structure("lost text");
            };
            if *self.tokens.peek()? == Token::Close(Tag::Value) {
                self.tokens.next()?;
                return Ok(Value::String(lossy(text)));
            }
            if !is_blank(&text) {
                return self.structure("expected a typed value or text in <value>");
            }
        }
        if *self.tokens.peek()? == Token::Close(Tag::Value) {
            self.tokens.next()?;
            return Ok(Value::String(String::new()));
        }
        let Some(kind) = self.peek_open()? else {
            return self.structure("expected a typed value or text in <value>");
        };
        self.tokens.next()?;
        let value = match kind {
            Tag::Array => self.array(depth)?,
            Tag::Struct => self.structure_value(depth)?,
            Tag::I4 | Tag::Int | Tag::I8 => {
                let n: i64 = self
                    .scalar_text(kind)?
                    .trim()
                    .parse()
                    .or_else(|_| self.bad(kind))?;
                // Python sends <int> beyond 32 bits; XmlRpc++ cannot hold them.
                i32::try_from(n).map_or(Value::Double(n as f64), Value::Int)
            }
            Tag::Boolean => match self.scalar_text(kind)?.trim() {
                "1" | "true" => Value::Bool(true),
                "0" | "false" => Value::Bool(false),
                _ => return self.bad(kind),
            },
            Tag::String => Value::String(lossy(self.text_until_close(kind)?)),
            Tag::Double => Value::Double(
                self.scalar_text(kind)?
                    .trim()
                    .parse()
                    .or_else(|_| self.bad(kind))?,
            ),
            Tag::DateTime => Value::DateTime(self.scalar_text(kind)?.trim().to_string()),
            Tag::Base64 => Value::Base64(decode_base64(&self.text_until_close(kind)?)),
            other => return self.structure(&format!("unsupported value type <{}>", other.name())),
        };
        self.close(Tag::Value)?;
        Ok(value)
    }

    /// A number's or flag's text: short by nature, so a long one is refused before it is
    /// copied.
    fn scalar_text(&mut self, tag: Tag) -> Result<String, ParseError> {
        let text = self.text_until_close(tag)?;
        if text.len() > 1024 {
            return self.bad(tag);
        }
        Ok(lossy(text))
    }

    fn bad<T>(&self, tag: Tag) -> Result<T, ParseError> {
        self.structure(&format!("invalid <{}>", tag.name()))
    }

    fn array(&mut self, depth: usize) -> Result<Value, ParseError> {
        let mut items = Vec::new();
        if !self.at_close(Tag::Array)? {
            self.open(Tag::Data)?;
            while !self.at_close(Tag::Data)? {
                items.push(self.value(depth + 1)?);
            }
            self.close(Tag::Data)?;
        }
        self.close(Tag::Array)?;
        Ok(Value::Array(items))
    }

    fn structure_value(&mut self, depth: usize) -> Result<Value, ParseError> {
        let mut members = BTreeMap::new();
        while !self.at_close(Tag::Struct)? {
            self.open(Tag::Member)?;
            let (mut name, mut value) = (None, None);
            while !self.at_close(Tag::Member)? {
                match self.peek_open()? {
                    Some(Tag::Name) => {
                        self.tokens.next()?;
                        name = Some(lossy(self.text_until_close(Tag::Name)?));
                    }
                    Some(Tag::Value) => value = Some(self.value(depth + 1)?),
                    _ => return self.structure("expected <name> or <value> in <member>"),
                }
            }
            self.close(Tag::Member)?;
            match (name, value) {
                (Some(n), Some(v)) => {
                    members.insert(n, v);
                }
                _ => return self.structure("<member> without <name> and <value>"),
            }
        }
        self.close(Tag::Struct)?;
        Ok(Value::Struct(members))
    }

    fn params(&mut self) -> Result<Vec<Value>, ParseError> {
        let mut params = Vec::new();
        if self.peek_open()? != Some(Tag::Params) {
            return Ok(params);
        }
        self.open(Tag::Params)?;
        while !self.at_close(Tag::Params)? {
            self.open(Tag::Param)?;
            params.push(self.value(1)?);
            self.close(Tag::Param)?;
        }
        self.close(Tag::Params)?;
        Ok(params)
    }
}

/// Reads a `<methodCall>`.
pub fn parse_call(body: &[u8], limits: &ParseLimits) -> Result<MethodCall, ParseError> {
    let mut c = Cursor::new(body, limits)?;
    c.open(Tag::MethodCall)?;
    c.open(Tag::MethodName)?;
    let method = lossy(c.text_until_close(Tag::MethodName)?)
        .trim()
        .to_string();
    let params = c.params()?;
    c.close(Tag::MethodCall)?;
    Ok(MethodCall { method, params })
}

/// Reads a `<methodResponse>`: the returned value, or the fault.
pub fn parse_response(
    body: &[u8],
    limits: &ParseLimits,
) -> Result<Result<Value, Fault>, ParseError> {
    let mut c = Cursor::new(body, limits)?;
    c.open(Tag::MethodResponse)?;
    let result = if c.peek_open()? == Some(Tag::Fault) {
        c.open(Tag::Fault)?;
        let fault = c.value(1)?;
        c.close(Tag::Fault)?;
        let members = fault.as_struct();
        let code = members
            .and_then(|m| m.get("faultCode"))
            .and_then(Value::as_i32)
            .unwrap_or(0);
        let message = members
            .and_then(|m| m.get("faultString"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        Err(Fault { code, message })
    } else {
        let mut params = c.params()?;
        if params.len() != 1 {
            return c.structure("a response carries exactly one value");
        }
        Ok(params.remove(0))
    };
    c.close(Tag::MethodResponse)?;
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(body: &str) -> MethodCall {
        parse_call(body.as_bytes(), &ParseLimits::default()).expect("parses")
    }

    /// A roscpp (XmlRpc++) requestTopic, as captured in the wire reference: untyped strings,
    /// `<i4>`, and base64 with line breaks.
    #[test]
    fn reads_roscpps_request_topic() {
        let body = "<?xml version=\"1.0\"?>\r\n<methodCall><methodName>requestTopic</methodName>\r\n<params><param><value>/udp_sub</value></param><param><value>/big</value></param><param><value><array><data><value><array><data><value>UDPROS</value><value><base64>EQAAAGNhbGxlcmlkPS91ZHBfc3Vi\nCgAAAHRvcGljPS9iaWc=\n</base64></value><value>127.0.0.1</value><value><i4>33941</i4></value><value><i4>1500</i4></value></data></array></value></data></array></value></param></params></methodCall>\r\n";
        let c = call(body);
        assert_eq!(c.method, "requestTopic");
        assert_eq!(c.params[0], Value::from("/udp_sub"));
        let offer = &c.params[2].as_array().unwrap()[0].as_array().unwrap();
        assert_eq!(offer[0], Value::from("UDPROS"));
        let header = offer[1].as_bytes().unwrap();
        assert!(header.starts_with(b"\x11\0\0\0callerid=/udp_sub"));
        assert_eq!(offer[3], Value::Int(33941));
        assert_eq!(offer[4], Value::Int(1500));
    }

    /// roscpp's base64 bug: a NUL where the last newline belongs (ros_comm #2164).
    #[test]
    fn tolerates_a_nul_inside_base64() {
        let body = b"<methodCall><methodName>m</methodName><params><param><value><base64>YWJj\0</base64></value></param></params></methodCall>";
        let c = parse_call(body, &ParseLimits::default()).unwrap();
        assert_eq!(c.params, [Value::Base64(b"abc".to_vec())]);
    }

    /// Python's xmlrpc.client: typed strings, <int>, <boolean>, <double>, structs, nesting.
    #[test]
    fn reads_pythons_dialect() {
        let body = "<?xml version='1.0'?>\n<methodCall>\n<methodName>setParam</methodName>\n<params>\n<param>\n<value><string>/n</string></value>\n</param>\n<param>\n<value><string>/p</string></value>\n</param>\n<param>\n<value><struct>\n<member>\n<name>a</name>\n<value><int>1</int></value>\n</member>\n<member>\n<name>b</name>\n<value><array><data>\n<value><boolean>1</boolean></value>\n<value><double>2.5</double></value>\n<value><string></string></value>\n</data></array></value>\n</member>\n</struct></value>\n</param>\n</params>\n</methodCall>\n";
        let c = call(body);
        let s = c.params[2].as_struct().unwrap();
        assert_eq!(s["a"], Value::Int(1));
        assert_eq!(
            s["b"],
            Value::from(vec![Value::Bool(true), Value::Double(2.5), Value::from("")])
        );
    }

    #[test]
    fn keeps_untyped_whitespace_and_resolves_references() {
        let c = call("<methodCall><methodName>m</methodName><params><param><value>  a &lt;&#65;&#x42;&amp; </value></param><param><value/></param><param><value><string/></value></param></params></methodCall>");
        assert_eq!(
            c.params,
            [Value::from("  a <AB& "), Value::from(""), Value::from("")]
        );
    }

    #[test]
    fn reads_faults_and_values() {
        let fault = b"<methodResponse><fault><value><struct><member><name>faultCode</name><value><int>1</int></value></member><member><name>faultString</name><value><string>nope</string></value></member></struct></value></fault></methodResponse>";
        assert_eq!(
            parse_response(fault, &ParseLimits::default()).unwrap(),
            Err(Fault::new(1, "nope"))
        );
        let ok = b"<methodResponse><params><param>\r\n\t<value><array><data><value><i4>1</i4></value><value></value><value><i4>0</i4></value></data></array></value>\r\n</param></params></methodResponse>\r\n";
        let v = parse_response(ok, &ParseLimits::default())
            .unwrap()
            .unwrap();
        assert_eq!(
            v,
            Value::from(vec![Value::Int(1), Value::from(""), Value::Int(0)])
        );
    }

    #[test]
    fn refuses_garbage_and_deep_nesting() {
        let limits = ParseLimits {
            max_depth: 5,
            ..Default::default()
        };
        let deep = format!(
            "<methodCall><methodName>m</methodName><params><param>{}{}</param></params></methodCall>",
            "<value><array><data>".repeat(10),
            "</data></array></value>".repeat(10)
        );
        assert_eq!(
            parse_call(deep.as_bytes(), &limits),
            Err(ParseError::TooDeep)
        );
        for bad in ["", "<x/>", "<methodCall>", "<methodCall><methodName>m</methodName><params><param><value><i4>x</i4></value></param></params></methodCall>"] {
            assert!(parse_call(bad.as_bytes(), &limits).is_err(), "{bad}");
        }
        assert!(matches!(
            parse_call(
                &[0u8; 100],
                &ParseLimits {
                    max_body: 10,
                    ..limits
                }
            ),
            Err(ParseError::TooLarge(100))
        ));
    }
}
