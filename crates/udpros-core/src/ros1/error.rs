use std::fmt;

/// Why a value could not be serialized or deserialized.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The input ended `needed` bytes short.
    UnexpectedEnd {
        /// Bytes the next value needs.
        needed: usize,
        /// Bytes the input still holds.
        remaining: usize,
    },
    /// A length prefix claimed more elements or bytes than the input still holds.
    LengthPrefix {
        /// The length the prefix claimed.
        len: u32,
        /// Bytes the input still holds.
        remaining: usize,
    },
    /// The message was decoded but bytes were left over: the peer's type differs.
    TrailingBytes(usize),
    /// A string, array or frame longer than a `u32` length prefix can carry.
    TooLong(usize),
    /// A Rust shape ROS1 cannot carry (maps, options, enums, ...).
    Unsupported(&'static str),
    /// A message from a type's own `Serialize` or `Deserialize` implementation.
    Custom(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::UnexpectedEnd { needed, remaining } => {
                write!(
                    f,
                    "message ended early: needed {needed} bytes, {remaining} left"
                )
            }
            Error::LengthPrefix { len, remaining } => {
                write!(
                    f,
                    "length prefix {len} exceeds the {remaining} bytes left in the message"
                )
            }
            Error::TrailingBytes(n) => {
                write!(f, "{n} bytes left over after the message (type mismatch?)")
            }
            Error::TooLong(n) => write!(f, "{n} elements do not fit a u32 length prefix"),
            Error::Unsupported(what) => write!(f, "ROS1 messages cannot carry {what}"),
            Error::Custom(msg) => f.write_str(msg),
        }
    }
}

impl std::error::Error for Error {}

impl serde::ser::Error for Error {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Error::Custom(msg.to_string())
    }
}

impl serde::de::Error for Error {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Error::Custom(msg.to_string())
    }
}
