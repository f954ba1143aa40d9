//! Small writers for the exposition: one metric family (HELP, TYPE, and a
//! sample per label set) through prometheus-client's encoder. Used by
//! `exposition.rs` only.

use std::fmt;

use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Unit;

use crate::proxy::ops::metrics::HistSnapshot;

/// Longest key shown in a label.
const HOT_KEY_LABEL_CHARS: usize = 64;

pub(crate) type Label = [(&'static str, String); 1];

pub(crate) fn label(key: &'static str, v: &str) -> Label {
    [(key, v.to_string())]
}

pub(crate) fn counter(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    rows: &[(Label, u64)],
) -> fmt::Result {
    let mut m = e.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (l, v) in rows {
        m.encode_family(l)?
            .encode_counter::<NoLabelSet, _, u64>(v, None)?;
    }
    Ok(())
}

pub(crate) fn counter1(e: &mut DescriptorEncoder, name: &str, help: &str, v: u64) -> fmt::Result {
    e.encode_descriptor(name, help, None, MetricType::Counter)?
        .encode_counter::<NoLabelSet, _, u64>(&v, None)
}

pub(crate) fn gauge<L: EncodeLabelSet>(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    rows: &[(L, f64)],
) -> fmt::Result {
    let mut m = e.encode_descriptor(name, help, unit, MetricType::Gauge)?;
    for (l, v) in rows {
        m.encode_family(l)?.encode_gauge(v)?;
    }
    Ok(())
}

pub(crate) fn gauge1(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    v: f64,
) -> fmt::Result {
    e.encode_descriptor(name, help, unit, MetricType::Gauge)?
        .encode_gauge(&v)
}

pub(crate) fn histogram(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    scale: f64,
    rows: &[(Label, &HistSnapshot)],
) -> fmt::Result {
    let mut m = e.encode_descriptor(name, help, unit, MetricType::Histogram)?;
    for (l, h) in rows {
        m.encode_family(l)?.encode_histogram::<NoLabelSet>(
            h.sum as f64 * scale,
            h.count(),
            &h.buckets(scale),
            None,
        )?;
    }
    Ok(())
}

/// Keeps a key printable in a label: other bytes become `?`, cut to 64 chars.
pub(crate) fn printable(key: &[u8]) -> String {
    key.iter()
        .take(HOT_KEY_LABEL_CHARS)
        .map(|&b| {
            if (0x20..0x7f).contains(&b) {
                b as char
            } else {
                '?'
            }
        })
        .collect()
}
