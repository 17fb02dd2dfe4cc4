//! Reading XML-RPC calls and responses from every client in the graph.
//!
//! Not a strict XML 1.0 parser, on purpose: roscpp can put a NUL inside `<base64>`,
//! strings may be untyped (`<value>text</value>`), numeric character references and
//! self-closing tags may appear. Nesting and size are bounded; nothing panics.

use super::base64::decode_base64;
use super::{Fault, MethodCall, Value};
use quick_xml::events::Event;
use quick_xml::Reader;
use std::collections::BTreeMap;
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParseLimits {
    pub max_body: usize,
    /// Deepest nesting of arrays and structs.
    pub max_depth: usize,
}

impl Default for ParseLimits {
    fn default() -> Self {
        ParseLimits {
            max_body: 32 << 20,
            max_depth: 64,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParseError {
    TooLarge(usize),
    TooDeep,
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
            ParseError::Xml(e) => write!(f, "malformed XML: {e}"),
            ParseError::Structure(e) => write!(f, "not XML-RPC: {e}"),
        }
    }
}

impl std::error::Error for ParseError {}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Open(String),
    Close(String),
    Text(Vec<u8>),
}

fn tokenize(body: &[u8]) -> Result<Vec<Token>, ParseError> {
    let mut reader = Reader::from_reader(body);
    let config = reader.config_mut();
    config.expand_empty_elements = true;
    config.check_end_names = false;
    config.trim_text(false);
    let mut tokens = Vec::new();
    let mut text: Option<Vec<u8>> = None;
    let name_of = |raw: &[u8]| String::from_utf8_lossy(raw).into_owned();
    loop {
        let event = reader
            .read_event()
            .map_err(|e| ParseError::Xml(e.to_string()))?;
        let piece: Option<Vec<u8>> = match &event {
            Event::Text(t) => Some(t.clone().into_inner().into_owned()),
            Event::CData(c) => Some(c.clone().into_inner().into_owned()),
            Event::GeneralRef(r) => Some(resolve_reference(&r.clone().into_inner())),
            _ => None,
        };
        if let Some(piece) = piece {
            text.get_or_insert_with(Vec::new).extend_from_slice(&piece);
            continue;
        }
        if let Some(t) = text.take() {
            tokens.push(Token::Text(t));
        }
        match event {
            Event::Start(e) => tokens.push(Token::Open(name_of(e.local_name().as_ref()))),
            Event::End(e) => tokens.push(Token::Close(name_of(e.local_name().as_ref()))),
            Event::Eof => break,
            _ => {} // declarations, comments, processing instructions
        }
    }
    Ok(tokens)
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

struct Cursor<'a> {
    tokens: &'a [Token],
    pos: usize,
    max_depth: usize,
}

impl Cursor<'_> {
    fn structure<T>(&self, what: &str) -> Result<T, ParseError> {
        Err(ParseError::Structure(format!(
            "{what} (at token {})",
            self.pos
        )))
    }

    fn skip_whitespace(&mut self) {
        while let Some(Token::Text(t)) = self.tokens.get(self.pos) {
            if t.iter().all(u8::is_ascii_whitespace) {
                self.pos += 1;
            } else {
                break;
            }
        }
    }

    fn peek_open(&mut self) -> Option<&str> {
        self.skip_whitespace();
        match self.tokens.get(self.pos) {
            Some(Token::Open(name)) => Some(name),
            _ => None,
        }
    }

    fn open(&mut self, name: &str) -> Result<(), ParseError> {
        if self.peek_open() == Some(name) {
            self.pos += 1;
            Ok(())
        } else {
            self.structure(&format!("expected <{name}>"))
        }
    }

    fn close(&mut self, name: &str) -> Result<(), ParseError> {
        self.skip_whitespace();
        match self.tokens.get(self.pos) {
            Some(Token::Close(n)) if n == name => {
                self.pos += 1;
                Ok(())
            }
            _ => self.structure(&format!("expected </{name}>")),
        }
    }

    fn at_close(&mut self, name: &str) -> bool {
        self.skip_whitespace();
        matches!(self.tokens.get(self.pos), Some(Token::Close(n)) if n == name)
    }

    /// The text of an element whose open tag was consumed, up to its close tag.
    fn text_until_close(&mut self, name: &str) -> Result<Vec<u8>, ParseError> {
        let text = match self.tokens.get(self.pos) {
            Some(Token::Text(t)) => {
                self.pos += 1;
                t.clone()
            }
            _ => Vec::new(),
        };
        match self.tokens.get(self.pos) {
            Some(Token::Close(n)) if n == name => {
                self.pos += 1;
                Ok(text)
            }
            _ => self.structure(&format!("expected text then </{name}>")),
        }
    }

    /// A `<value>` element, open tag included.
    fn value(&mut self, depth: usize) -> Result<Value, ParseError> {
        if depth > self.max_depth {
            return Err(ParseError::TooDeep);
        }
        self.open("value")?;
        // Untyped: text (possibly empty) straight up to </value> is a string.
        let start = self.pos;
        if let Some(Token::Text(t)) = self.tokens.get(self.pos) {
            if matches!(self.tokens.get(self.pos + 1), Some(Token::Close(n)) if n == "value") {
                self.pos += 2;
                return Ok(Value::String(String::from_utf8_lossy(t).into_owned()));
            }
        }
        if matches!(self.tokens.get(self.pos), Some(Token::Close(n)) if n == "value") {
            self.pos += 1;
            return Ok(Value::String(String::new()));
        }
        let Some(kind) = self.peek_open().map(str::to_string) else {
            self.pos = start;
            return self.structure("expected a typed value or text in <value>");
        };
        self.pos += 1;
        let value = match kind.as_str() {
            "array" => self.array(depth)?,
            "struct" => self.structure_value(depth)?,
            scalar => {
                let raw = self.text_until_close(scalar)?;
                let text = String::from_utf8_lossy(&raw);
                let bad = || ParseError::Structure(format!("invalid <{scalar}> '{}'", text.trim()));
                match scalar {
                    "i4" | "int" | "i8" => {
                        let n: i64 = text.trim().parse().map_err(|_| bad())?;
                        // Python sends <int> beyond 32 bits; XmlRpc++ cannot hold them.
                        i32::try_from(n).map_or(Value::Double(n as f64), Value::Int)
                    }
                    "boolean" => match text.trim() {
                        "1" | "true" => Value::Bool(true),
                        "0" | "false" => Value::Bool(false),
                        _ => return Err(bad()),
                    },
                    "string" => Value::String(text.into_owned()),
                    "double" => Value::Double(text.trim().parse().map_err(|_| bad())?),
                    "dateTime.iso8601" => Value::DateTime(text.trim().to_string()),
                    "base64" => Value::Base64(decode_base64(&raw)),
                    other => return self.structure(&format!("unsupported value type <{other}>")),
                }
            }
        };
        self.close("value")?;
        Ok(value)
    }

    fn array(&mut self, depth: usize) -> Result<Value, ParseError> {
        let mut items = Vec::new();
        if !self.at_close("array") {
            self.open("data")?;
            while !self.at_close("data") {
                items.push(self.value(depth + 1)?);
            }
            self.close("data")?;
        }
        self.close("array")?;
        Ok(Value::Array(items))
    }

    fn structure_value(&mut self, depth: usize) -> Result<Value, ParseError> {
        let mut members = BTreeMap::new();
        while !self.at_close("struct") {
            self.open("member")?;
            let (mut name, mut value) = (None, None);
            while !self.at_close("member") {
                match self.peek_open() {
                    Some("name") => {
                        self.pos += 1;
                        name = Some(
                            String::from_utf8_lossy(&self.text_until_close("name")?).into_owned(),
                        );
                    }
                    Some("value") => value = Some(self.value(depth + 1)?),
                    _ => return self.structure("expected <name> or <value> in <member>"),
                }
            }
            self.close("member")?;
            match (name, value) {
                (Some(n), Some(v)) => {
                    members.insert(n, v);
                }
                _ => return self.structure("<member> without <name> and <value>"),
            }
        }
        self.close("struct")?;
        Ok(Value::Struct(members))
    }

    fn params(&mut self) -> Result<Vec<Value>, ParseError> {
        let mut params = Vec::new();
        if self.peek_open() != Some("params") {
            return Ok(params);
        }
        self.open("params")?;
        while !self.at_close("params") {
            self.open("param")?;
            params.push(self.value(1)?);
            self.close("param")?;
        }
        self.close("params")?;
        Ok(params)
    }
}

fn cursor_over<'a>(tokens: &'a [Token], limits: &ParseLimits) -> Cursor<'a> {
    Cursor {
        tokens,
        pos: 0,
        max_depth: limits.max_depth,
    }
}

fn tokens_of(body: &[u8], limits: &ParseLimits) -> Result<Vec<Token>, ParseError> {
    if body.len() > limits.max_body {
        return Err(ParseError::TooLarge(body.len()));
    }
    tokenize(body)
}

/// Reads a `<methodCall>`.
pub fn parse_call(body: &[u8], limits: &ParseLimits) -> Result<MethodCall, ParseError> {
    let tokens = tokens_of(body, limits)?;
    let mut c = cursor_over(&tokens, limits);
    c.open("methodCall")?;
    c.open("methodName")?;
    let method = String::from_utf8_lossy(&c.text_until_close("methodName")?)
        .trim()
        .to_string();
    let params = c.params()?;
    c.close("methodCall")?;
    Ok(MethodCall { method, params })
}

/// Reads a `<methodResponse>`: the returned value, or the fault.
pub fn parse_response(
    body: &[u8],
    limits: &ParseLimits,
) -> Result<Result<Value, Fault>, ParseError> {
    let tokens = tokens_of(body, limits)?;
    let mut c = cursor_over(&tokens, limits);
    c.open("methodResponse")?;
    let result = if c.peek_open() == Some("fault") {
        c.open("fault")?;
        let fault = c.value(1)?;
        c.close("fault")?;
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
    c.close("methodResponse")?;
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
