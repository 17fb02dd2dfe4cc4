//! Decoders never allocate more than their input could describe: whatever bytes arrive,
//! the memory a decode takes is bounded by a small multiple of the input's size.

use bytes::Bytes;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use udpros::msg::dynamic::DynamicType;
use udpros::msgs;
use udpros::wire;

/// Counts the bytes live on this thread, and the peak since the last reset.
struct Counting;

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = LIVE.try_with(|live| {
            live.set(live.get() + layout.size() as isize);
            let _ = PEAK.try_with(|peak| peak.set(peak.get().max(live.get())));
        });
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let _ = LIVE.try_with(|live| live.set(live.get() - layout.size() as isize));
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The peak of memory allocated while `f` runs, beyond what was live before.
fn peak_during(f: impl FnOnce()) -> usize {
    let base = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(base));
    f();
    (PEAK.with(Cell::get) - base).max(0) as usize
}

/// Inputs meant to provoke large allocations: every u32 length prefix of the most
/// array-heavy types set to huge values, at every position.
fn hostile_inputs() -> Vec<Bytes> {
    let mut out = Vec::new();
    for len in [16usize, 64, 257, 4096] {
        for fill in [0xffu8, 0x7f, 0x01] {
            let mut data = vec![0u8; len];
            for start in (0..len.saturating_sub(4)).step_by(3) {
                data[start..start + 4].copy_from_slice(&[fill, fill, fill, 0x7f]);
                out.push(Bytes::from(data.clone()));
                data[start..start + 4].copy_from_slice(&[0; 4]);
            }
            out.push(Bytes::from(vec![fill; len]));
        }
    }
    out
}

#[test]
fn decoding_hostile_input_stays_within_a_multiple_of_its_size() {
    let dynamic: Vec<DynamicType> = msgs::MESSAGES
        .iter()
        .map(|m| DynamicType::from_definition(m.type_name, m.definition).expect("definition"))
        .collect();
    let mut worst_typed = 0f64;
    let mut worst_dynamic = 0f64;
    for input in hostile_inputs() {
        let n = input.len();
        let typed = peak_during(|| {
            let _ = wire::from_bytes::<msgs::sensor_msgs::PointCloud2>(&input);
            let _ = wire::from_bytes::<msgs::diagnostic_msgs::DiagnosticArray>(&input);
            let _ = wire::from_bytes::<msgs::std_msgs::Float64MultiArray>(&input);
            let _ = wire::from_bytes::<msgs::rosgraph_msgs::Log>(&input);
        });
        // Length prefixes are checked against the input before serde preallocates for them.
        assert!(
            typed <= 4096 + 64 * n,
            "typed decode of {n} bytes took {typed} bytes"
        );
        worst_typed = worst_typed.max(typed as f64 / n as f64);
        for ty in &dynamic {
            let used = peak_during(|| {
                let _ = ty.decode(&input);
            });
            // A value tree node per byte at most 8 (the decoder's budget), of ~100 bytes each.
            assert!(
                used <= 4096 + 1024 * n,
                "{} decode of {n} bytes took {used}",
                ty.type_name()
            );
            worst_dynamic = worst_dynamic.max(used as f64 / n as f64);
        }
    }
    eprintln!(
        "worst bytes allocated per input byte: typed {worst_typed:.1}, dynamic {worst_dynamic:.1}"
    );
}
