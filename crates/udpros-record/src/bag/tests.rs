use super::*;
use crate::{Compression, Connection, ConnectionId, Limits, RecordError};
use std::io::Cursor;

fn sonar() -> Connection {
    Connection {
        topic: "/sonar/range".into(),
        msg_type: "std_msgs/Float32".into(),
        md5sum: "73fcbf46b49191e672908e50842a83d4".into(),
        definition: "float32 data\n".into(),
        callerid: "/ping_sonar".into(),
        latching: false,
    }
}

fn status() -> Connection {
    Connection {
        topic: "/status".into(),
        msg_type: "std_msgs/String".into(),
        md5sum: "992ce8a1687cec8c8bd883ec73ca41d1".into(),
        definition: "string data\n".into(),
        callerid: "/vehicle".into(),
        latching: true,
    }
}

/// A bag of `n` messages on two connections, each message a few bytes that say which it is.
fn bag_of(n: u32, compression: Compression, chunk: usize) -> Vec<u8> {
    let mut writer = Writer::new(Cursor::new(Vec::new()), compression)
        .unwrap()
        .with_chunk_threshold(chunk);
    let a = writer.add_connection(&sonar()).unwrap();
    let b = writer.add_connection(&status()).unwrap();
    for i in 0..n {
        let conn = if i.is_multiple_of(3) { b } else { a };
        writer
            .write(
                conn,
                1_700_000_000_000_000_000 + u64::from(i) * 1_000_000,
                &i.to_le_bytes(),
            )
            .unwrap();
    }
    writer.finish().unwrap().into_inner()
}

fn read_all(bytes: &[u8]) -> (Vec<Item>, Option<RecordError>) {
    let mut items = Vec::new();
    for item in Reader::new(bytes, Limits::default()).unwrap() {
        match item {
            Ok(item) => items.push(item),
            Err(e) => return (items, Some(e)),
        }
    }
    (items, None)
}

fn messages(items: &[Item]) -> Vec<(ConnectionId, u64, Vec<u8>)> {
    items
        .iter()
        .filter_map(|item| match item {
            Item::Message {
                connection,
                time_ns,
                data,
            } => Some((*connection, *time_ns, data.clone())),
            Item::Connection { .. } => None,
        })
        .collect()
}

#[test]
fn every_compression_reads_back_what_was_written_in_order() {
    for compression in [Compression::None, Compression::Bz2, Compression::Lz4] {
        let bytes = bag_of(500, compression, 1000);
        let (items, error) = read_all(&bytes);
        assert!(error.is_none(), "{compression:?}: {error:?}");
        let connections: Vec<_> = items
            .iter()
            .filter_map(|i| match i {
                Item::Connection { connection, .. } => Some(connection.clone()),
                Item::Message { .. } => None,
            })
            .collect();
        assert_eq!(connections, vec![sonar(), status()], "{compression:?}");
        let got = messages(&items);
        assert_eq!(got.len(), 500, "{compression:?}");
        for (i, (conn, time, data)) in got.iter().enumerate() {
            let i = i as u32;
            assert_eq!(*conn, ConnectionId(if i.is_multiple_of(3) { 1 } else { 0 }));
            assert_eq!(*time, 1_700_000_000_000_000_000 + u64::from(i) * 1_000_000);
            assert_eq!(data, &i.to_le_bytes());
        }
    }
}

#[test]
fn the_closed_bag_header_points_at_the_connections_and_chunk_infos() {
    let bytes = bag_of(100, Compression::None, 200);
    let header_len = u32::from_le_bytes(bytes[13..17].try_into().unwrap()) as usize;
    let header = fields(&bytes[17..17 + header_len]).unwrap();
    let get = |name: &str| header.iter().find(|(n, _)| *n == name).unwrap().1;
    let index_pos = u64::from_le_bytes(get("index_pos").try_into().unwrap()) as usize;
    let conn_count = u32::from_le_bytes(get("conn_count").try_into().unwrap());
    let chunk_count = u32::from_le_bytes(get("chunk_count").try_into().unwrap());
    assert_eq!(conn_count, 2);
    assert!(chunk_count > 5, "small chunks: {chunk_count}");
    // The record at index_pos is the first connection record, as rosbag seeks it.
    let at = &bytes[index_pos..];
    let len = u32::from_le_bytes(at[..4].try_into().unwrap()) as usize;
    let fields = fields(&at[4..4 + len]).unwrap();
    assert!(fields.contains(&("op", &[op::CONNECTION][..])));
    // The header record fills 4096 bytes exactly, padding included.
    let data_len =
        u32::from_le_bytes(bytes[17 + header_len..21 + header_len].try_into().unwrap()) as usize;
    assert_eq!(8 + header_len + data_len, BAG_HEADER_LEN);
}

#[test]
fn a_bag_cut_at_every_byte_of_its_end_reads_up_to_the_cut_without_panicking() {
    for compression in [Compression::None, Compression::Lz4, Compression::Bz2] {
        let bytes = bag_of(60, compression, 150);
        let whole = messages(&read_all(&bytes).0);
        let mut last = usize::MAX;
        // Every byte of the last 2 kB (the last chunks and the index), every 37th before;
        // bz2 every 7th (each of its decoders zeroes megabytes of tables).
        let tail = bytes.len() - 2048;
        let step = if compression == Compression::Bz2 {
            7
        } else {
            1
        };
        let cuts = (tail..bytes.len())
            .step_by(step)
            .chain((MAGIC.len()..tail).step_by(37));
        let mut cuts: Vec<usize> = cuts.collect();
        cuts.sort_unstable_by(|a, b| b.cmp(a));
        for cut in cuts {
            let (items, _) = read_all(&bytes[..cut]);
            let got = messages(&items);
            // Whatever is read is the front of what was written, and shrinks as the
            // cut moves forward.
            assert_eq!(got[..], whole[..got.len()], "{compression:?} cut at {cut}");
            assert!(got.len() <= last);
            last = got.len();
        }
        assert_eq!(last, 0);
    }
}

#[test]
fn an_unclosed_bag_reads_every_whole_chunk() {
    let mut writer = Writer::new(Cursor::new(Vec::new()), Compression::Lz4)
        .unwrap()
        .with_chunk_threshold(100);
    let a = writer.add_connection(&sonar()).unwrap();
    for i in 0..40u32 {
        writer.write(a, u64::from(i), &i.to_le_bytes()).unwrap();
    }
    // Never finished: the file is what a killed recorder leaves.
    let bytes = writer.file.into_inner().into_inner();
    let (items, error) = read_all(&bytes);
    assert!(error.is_none(), "{error:?}");
    let got = messages(&items);
    assert!(got.len() >= 35, "{}", got.len());
    assert!(got
        .iter()
        .enumerate()
        .all(|(i, m)| m.2 == (i as u32).to_le_bytes()));
}

#[test]
fn lengths_over_the_limits_are_refused_before_anything_is_allocated() {
    // A chunk that claims 4 GB of data.
    let mut bytes = MAGIC.to_vec();
    let mut header = Vec::new();
    put_field(&mut header, "op", &[op::CHUNK]);
    put_field(&mut header, "compression", b"none");
    put_field(&mut header, "size", &u32::MAX.to_le_bytes());
    bytes.extend_from_slice(&(header.len() as u32).to_le_bytes());
    bytes.extend_from_slice(&header);
    bytes.extend_from_slice(&u32::MAX.to_le_bytes());
    let (_, error) = read_all(&bytes);
    assert!(
        matches!(
            error,
            Some(RecordError::TooBig {
                size: 4294967295,
                ..
            })
        ),
        "{error:?}"
    );
    assert!(error.unwrap().to_string().contains("over the limit"));

    // A chunk whose uncompressed size is small but which inflates past it (a bz2 bomb).
    let zeros = vec![0u8; 8 << 20];
    let mut encoder = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::best());
    std::io::Write::write_all(&mut encoder, &zeros).unwrap();
    let bomb = encoder.finish().unwrap();
    let mut bytes = MAGIC.to_vec();
    let mut header = Vec::new();
    put_field(&mut header, "op", &[op::CHUNK]);
    put_field(&mut header, "compression", b"bz2");
    put_field(&mut header, "size", &1000u32.to_le_bytes());
    put_record(&mut bytes, &header, &bomb);
    let (_, error) = read_all(&bytes);
    let error = error.expect("refused").to_string();
    assert!(error.contains("decompresses to 1001 bytes"), "{error}");

    // A record header of 100 MB.
    let mut bytes = MAGIC.to_vec();
    bytes.extend_from_slice(&(100u32 << 20).to_le_bytes());
    let (_, error) = read_all(&bytes);
    assert!(
        matches!(error, Some(RecordError::TooBig { .. })),
        "{error:?}"
    );
}

#[test]
fn a_bag_that_declares_too_many_connections_is_refused() {
    let mut writer = Writer::new(Cursor::new(Vec::new()), Compression::None).unwrap();
    for i in 0..20 {
        let mut c = sonar();
        c.topic = format!("/t{i}");
        writer.add_connection(&c).unwrap();
    }
    let bytes = writer.finish().unwrap().into_inner();
    let limits = Limits {
        max_connections: 10,
        ..Limits::default()
    };
    let result: Result<Vec<Item>, RecordError> = Reader::new(&bytes[..], limits).unwrap().collect();
    assert!(matches!(result, Err(RecordError::TooBig { limit: 10, .. })));
}

#[test]
fn garbage_is_an_error_never_a_panic() {
    let mut seed = 0x9e3779b97f4a7c15u64;
    let base = bag_of(30, Compression::Lz4, 100);
    for _ in 0..2000 {
        let mut bytes = base.clone();
        for _ in 0..4 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let at = MAGIC.len() + (seed as usize % (bytes.len() - MAGIC.len()));
            bytes[at] = (seed >> 32) as u8;
        }
        let _ = read_all(&bytes);
    }
}
