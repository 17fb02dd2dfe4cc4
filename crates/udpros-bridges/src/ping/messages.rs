//! The current Ping message set (common, Ping1D, Ping360): typed messages decoded with
//! exact-length checks (a vector's u16 count must equal the bytes that follow) and encoded
//! with their vector counts derived from the data.

use bytes::Bytes;
use serde::Serialize;
use std::fmt;

/// Why a payload is not a message of the set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// No message of the set has this id.
    UnknownId(u16),
    /// The payload's size does not fit the message.
    Length {
        /// The message id.
        id: u16,
        /// The size its fields take.
        expected: usize,
        /// The payload's size.
        actual: usize,
    },
    /// A vector's count disagrees with the bytes that follow it.
    VectorCount {
        /// The message id.
        id: u16,
        /// The count the payload declares.
        count: usize,
        /// The bytes after it.
        remaining: usize,
    },
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::UnknownId(id) => write!(f, "unknown message id {id}"),
            DecodeError::Length {
                id,
                expected,
                actual,
            } => {
                write!(
                    f,
                    "message {id}: payload of {actual} bytes, expected {expected}"
                )
            }
            DecodeError::VectorCount {
                id,
                count,
                remaining,
            } => {
                write!(
                    f,
                    "message {id}: vector count {count} but {remaining} bytes follow"
                )
            }
        }
    }
}

impl std::error::Error for DecodeError {}

/// A fixed-size little-endian payload field.
pub(crate) trait Field: Sized {
    const SIZE: usize;
    fn put(&self, out: &mut Vec<u8>);
    /// `bytes` is exactly `SIZE` long.
    fn get(bytes: &[u8]) -> Self;
}

macro_rules! le_field {
    ($($t:ty),*) => {$(
        impl Field for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            fn put(&self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
            fn get(bytes: &[u8]) -> Self {
                let mut a = [0u8; std::mem::size_of::<$t>()];
                a.copy_from_slice(bytes);
                <$t>::from_le_bytes(a)
            }
        }
    )*};
}

le_field!(u8, u16, u32, i16);

/// What follows a message's fixed fields.
#[derive(Clone, Copy)]
pub(crate) enum Tail {
    None,
    /// A u16 count, then that many bytes.
    Vector,
    /// The rest of the payload (text).
    Rest,
}

/// Splits a payload into fixed fields and tail, checking sizes.
pub(crate) fn split(
    id: u16,
    payload: &[u8],
    fixed: usize,
    tail: Tail,
) -> Result<(&[u8], &[u8]), DecodeError> {
    let too_short = || DecodeError::Length {
        id,
        expected: fixed,
        actual: payload.len(),
    };
    match tail {
        Tail::None if payload.len() != fixed => Err(too_short()),
        Tail::None => Ok((payload, &[])),
        Tail::Rest if payload.len() < fixed => Err(too_short()),
        Tail::Rest => Ok(payload.split_at(fixed)),
        Tail::Vector => {
            if payload.len() < fixed + 2 {
                return Err(DecodeError::Length {
                    id,
                    expected: fixed + 2,
                    actual: payload.len(),
                });
            }
            let (head, rest) = payload.split_at(fixed);
            let count = usize::from(u16::from_le_bytes([rest[0], rest[1]]));
            if count != rest.len() - 2 {
                return Err(DecodeError::VectorCount {
                    id,
                    count,
                    remaining: rest.len() - 2,
                });
            }
            Ok((head, &rest[2..]))
        }
    }
}

/// Defines message structs and the enum over them. Field names follow the protocol's JSON
/// (and so brping's attribute names).
macro_rules! ping_messages {
    (@tail) => { Tail::None };
    (@tail vec $v:ident) => { Tail::Vector };
    (@tail text $t:ident) => { Tail::Rest };
    ($enum:ident { $(
        $(#[$doc:meta])* $name:ident = $id:literal { $($field:ident : $ty:ty),* $(,)? } $(vec $vec:ident)? $(text $text:ident)? ;
    )* }) => {
        $(
            #[doc = concat!("`", stringify!($name), "`, id ", stringify!($id), ".")]
            $(#[$doc])*
            #[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
            pub struct $name {
                $(
                    #[doc = concat!("`", stringify!($field), "`, as the protocol names it.")]
                    pub $field: $ty,
                )*
                $(
                    /// The trailing array (its `u16` count is implied by the length).
                    #[serde(serialize_with = "udpros::wire::zero_copy::serialize")]
                    pub $vec: Bytes,
                )?
                $(
                    /// The trailing text, without its terminating NULs.
                    pub $text: String,
                )?
            }

            impl $name {
                /// The message id.
                pub const ID: u16 = $id;
                const FIXED: usize = 0 $(+ <$ty as Field>::SIZE)*;

                const TAIL: Tail = ping_messages!(@tail $(vec $vec)? $(text $text)?);

                /// The message from a frame's payload.
                #[allow(unused_variables, unused_mut, unused_assignments)]
                pub fn decode(payload: &[u8]) -> Result<Self, DecodeError> {
                    let (head, tail) = split($id, payload, Self::FIXED, Self::TAIL)?;
                    let mut at = 0;
                    $(
                        let $field = <$ty as Field>::get(&head[at..at + <$ty as Field>::SIZE]);
                        at += <$ty as Field>::SIZE;
                    )*
                    Ok($name {
                        $($field,)*
                        $($vec: Bytes::copy_from_slice(tail),)?
                        $($text: String::from_utf8_lossy(tail).trim_end_matches('\0').to_string(),)?
                    })
                }

                /// The payload of a frame carrying it.
                #[allow(unused_mut)]
                pub fn encode(&self) -> Vec<u8> {
                    let mut out = Vec::with_capacity(Self::FIXED + 2);
                    $( self.$field.put(&mut out); )*
                    $(
                        let data = &self.$vec[..self.$vec.len().min(usize::from(u16::MAX))];
                        (data.len() as u16).put(&mut out);
                        out.extend_from_slice(data);
                    )?
                    $( out.extend_from_slice(self.$text.as_bytes()); )?
                    out
                }
            }
        )*

        /// Every message of this set.
        #[derive(Debug, Clone, PartialEq, Eq, Serialize)]
        #[serde(tag = "message", rename_all = "snake_case")]
        pub enum $enum {
            $(
                #[doc = concat!("`", stringify!($name), "`.")]
                $name($name),
            )*
        }

        impl $enum {
            /// The message with id `id` from a frame's payload.
            pub fn decode(id: u16, payload: &[u8]) -> Result<Self, DecodeError> {
                match id {
                    $($id => $name::decode(payload).map($enum::$name),)*
                    other => Err(DecodeError::UnknownId(other)),
                }
            }

            /// Its message id.
            pub fn id(&self) -> u16 {
                match self {
                    $($enum::$name(_) => $id,)*
                }
            }

            /// The payload of a frame carrying it.
            pub fn encode(&self) -> Vec<u8> {
                match self {
                    $($enum::$name(m) => m.encode(),)*
                }
            }

            /// The complete frame (source and destination 0, as hosts send).
            pub fn to_frame(&self) -> Vec<u8> {
                super::frame::encode_frame(self.id(), 0, 0, &self.encode())
            }

            /// Whether `id` belongs to this set.
            pub fn knows(id: u16) -> bool {
                matches!(id, $($id)|*)
            }
        }

        $(
            impl From<$name> for $enum {
                fn from(m: $name) -> Self {
                    $enum::$name(m)
                }
            }
        )*
    };
}

pub(crate) use ping_messages;

ping_messages!(Message {
    /// A set or control command succeeded.
    Ack = 1 { acked_id: u16 };
    /// A set or control command failed, with the device's reason.
    Nack = 2 { nacked_id: u16 } text nack_message;
    AsciiText = 3 {} text ascii_message;
    DeviceInformation = 4 { device_type: u8, device_revision: u8, firmware_version_major: u8, firmware_version_minor: u8, firmware_version_patch: u8, reserved: u8 };
    ProtocolVersion = 5 { version_major: u8, version_minor: u8, version_patch: u8, reserved: u8 };
    /// Asks the device to send message `requested_id`.
    GeneralRequest = 6 { requested_id: u16 };
    SetDeviceId = 100 { device_id: u8 };

    Ping1dSetDeviceId = 1000 { device_id: u8 };
    SetRange = 1001 { scan_start: u32, scan_length: u32 };
    SetSpeedOfSound = 1002 { speed_of_sound: u32 };
    SetModeAuto = 1003 { mode_auto: u8 };
    SetPingInterval = 1004 { ping_interval: u16 };
    SetGainSetting = 1005 { gain_setting: u8 };
    SetPingEnable = 1006 { ping_enabled: u8 };
    /// Reboots a Ping1D into its bootloader: never sent by this crate.
    GotoBootloader = 1100 {};
    FirmwareVersion = 1200 { device_type: u8, device_model: u8, firmware_version_major: u16, firmware_version_minor: u16 };
    DeviceId = 1201 { device_id: u8 };
    Voltage5 = 1202 { voltage_5: u16 };
    SpeedOfSound = 1203 { speed_of_sound: u32 };
    Range = 1204 { scan_start: u32, scan_length: u32 };
    ModeAuto = 1205 { mode_auto: u8 };
    PingInterval = 1206 { ping_interval: u16 };
    GainSetting = 1207 { gain_setting: u32 };
    TransmitDuration = 1208 { transmit_duration: u16 };
    GeneralInfo = 1210 { firmware_version_major: u16, firmware_version_minor: u16, voltage_5: u16, ping_interval: u16, gain_setting: u8, mode_auto: u8 };
    DistanceSimple = 1211 { distance: u32, confidence: u8 };
    Distance = 1212 { distance: u32, confidence: u16, transmit_duration: u16, ping_number: u32, scan_start: u32, scan_length: u32, gain_setting: u32 };
    ProcessorTemperature = 1213 { processor_temperature: u16 };
    PcbTemperature = 1214 { pcb_temperature: u16 };
    PingEnable = 1215 { ping_enabled: u8 };
    Profile = 1300 { distance: u32, confidence: u16, transmit_duration: u16, ping_number: u32, scan_start: u32, scan_length: u32, gain_setting: u32 } vec profile_data;
    ContinuousStart = 1400 { id: u16 };
    ContinuousStop = 1401 { id: u16 };

    Ping360SetDeviceId = 2000 { id: u8, reserved: u8 };
    DeviceData = 2300 { mode: u8, gain_setting: u8, angle: u16, transmit_duration: u16, sample_period: u16, transmit_frequency: u16, number_of_samples: u16 } vec data;
    AutoDeviceData = 2301 { mode: u8, gain_setting: u8, angle: u16, transmit_duration: u16, sample_period: u16, transmit_frequency: u16, start_angle: u16, stop_angle: u16, num_steps: u8, delay: u8, number_of_samples: u16 } vec data;
    Reset = 2600 { bootloader: u8, reserved: u8 };
    Transducer = 2601 { mode: u8, gain_setting: u8, angle: u16, transmit_duration: u16, sample_period: u16, transmit_frequency: u16, number_of_samples: u16, transmit: u8, reserved: u8 };
    AutoTransmit = 2602 { mode: u8, gain_setting: u8, transmit_duration: u16, sample_period: u16, transmit_frequency: u16, number_of_samples: u16, start_angle: u16, stop_angle: u16, num_steps: u8, delay: u8 };
    MotorOff = 2903 {};
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_with_exact_lengths_and_derives_vector_counts() {
        let p = Profile {
            distance: 1500,
            profile_data: Bytes::from(vec![1, 2, 3]),
            ..Default::default()
        };
        let payload = p.encode();
        assert_eq!(payload.len(), 26 + 3);
        assert_eq!(&payload[24..26], &[3, 0]);
        assert_eq!(Message::decode(1300, &payload), Ok(Message::Profile(p)));
        let mut wrong_count = payload.clone();
        wrong_count[24] = 9;
        assert!(matches!(
            Message::decode(1300, &wrong_count),
            Err(DecodeError::VectorCount { .. })
        ));
        assert!(matches!(
            Message::decode(1212, &[0; 23]),
            Err(DecodeError::Length { .. })
        ));
        assert!(matches!(
            Message::decode(1211, &[0; 6]),
            Err(DecodeError::Length { .. })
        ));
        assert_eq!(
            Message::decode(9999, &[]),
            Err(DecodeError::UnknownId(9999))
        );
    }

    #[test]
    fn text_tails_tolerate_bytes_that_are_not_utf8() {
        let mut payload = 1005u16.to_le_bytes().to_vec();
        payload.extend_from_slice(b"Gain out of range\xff");
        let Ok(Message::Nack(n)) = Message::decode(2, &payload) else {
            panic!("decodes")
        };
        assert_eq!(n.nacked_id, 1005);
        assert!(n.nack_message.starts_with("Gain out of range"));
    }
}
