//! The YAML layer: turns the text into raw pools (names, directives and
//! their scalar values, with lines), checking twemproxy's shape on the way —
//! one document, a mapping of pools, each a mapping of scalars and one-level
//! sequences. Knows nothing of what a directive means (see `pool.rs`).

use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::Marker;

/// A pool before its directives are read.
#[derive(Debug)]
pub(super) struct RawPool {
    pub(super) name: String,
    pub(super) line: usize,
    pub(super) entries: Vec<RawEntry>,
}

/// `key: value` inside a pool.
#[derive(Debug)]
pub(super) struct RawEntry {
    pub(super) key: String,
    pub(super) line: usize,
    pub(super) value: RawValue,
}

#[derive(Debug)]
pub(super) enum RawValue {
    Scalar(String),
    /// Each element with its line.
    Seq(Vec<(String, usize)>),
}

/// A failure: the line when known, and what.
pub(super) type Failure = (Option<usize>, String);

struct Collect(Vec<(Event, usize)>);

impl MarkedEventReceiver for Collect {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        self.0.push((ev, mark.line()));
    }
}

/// Reads every pool of `text`.
pub(super) fn read(text: &str) -> Result<Vec<RawPool>, Failure> {
    let mut events = Collect(Vec::new());
    Parser::new_from_str(text)
        .load(&mut events, true)
        .map_err(|e| {
            (
                Some(e.marker().line()),
                format!("not valid YAML: {}", e.info()),
            )
        })?;
    let mut walk = Walk {
        events: events.0.into_iter(),
        line: 1,
    };
    let mut documents = 0;
    let mut pools = Vec::new();
    loop {
        match walk.next()? {
            Event::StreamStart | Event::DocumentEnd | Event::Nothing => {}
            Event::StreamEnd => break,
            Event::DocumentStart => {
                documents += 1;
                if documents > 1 {
                    return Err(walk.fail("must contain only one YAML document"));
                }
                pools = walk.document()?;
            }
            _ => return Err(walk.fail("unexpected YAML outside a document")),
        }
    }
    Ok(pools)
}

struct Walk {
    events: std::vec::IntoIter<(Event, usize)>,
    /// Line of the last event taken.
    line: usize,
}

impl Walk {
    fn next(&mut self) -> Result<Event, Failure> {
        match self.events.next() {
            Some((ev, line)) => {
                self.line = line;
                match ev {
                    Event::Alias(_) => Err(self.fail("uses a YAML alias, which twemproxy refuses")),
                    ev => Ok(ev),
                }
            }
            None => Err((None, "ends in the middle of the YAML".to_string())),
        }
    }

    fn fail(&self, message: &str) -> Failure {
        (Some(self.line), message.to_string())
    }

    /// The document's root: a mapping of pool name to pool.
    fn document(&mut self) -> Result<Vec<RawPool>, Failure> {
        match self.next()? {
            Event::MappingStart(..) => {}
            Event::Scalar(s, ..) if s.is_empty() => return Ok(Vec::new()),
            _ => return Err(self.fail("must be a mapping of pool names to pools")),
        }
        let mut pools = Vec::new();
        loop {
            match self.next()? {
                Event::MappingEnd => return Ok(pools),
                Event::Scalar(name, ..) => {
                    let line = self.line;
                    let entries = self.pool(&name)?;
                    pools.push(RawPool {
                        name,
                        line,
                        entries,
                    });
                }
                _ => return Err(self.fail("a pool name must be a plain string")),
            }
        }
    }

    /// One pool's directives.
    fn pool(&mut self, name: &str) -> Result<Vec<RawEntry>, Failure> {
        match self.next()? {
            Event::MappingStart(..) => {}
            _ => return Err(self.fail(&format!("pool '{name}' must be a mapping of directives"))),
        }
        let mut entries = Vec::new();
        loop {
            let key = match self.next()? {
                Event::MappingEnd => return Ok(entries),
                Event::Scalar(key, ..) => key,
                _ => {
                    return Err(self.fail(&format!(
                        "pool '{name}': a directive name must be a plain string"
                    )))
                }
            };
            let line = self.line;
            let value = match self.next()? {
                Event::Scalar(v, ..) => RawValue::Scalar(v),
                Event::SequenceStart(..) => RawValue::Seq(self.sequence(name, &key)?),
                _ => {
                    return Err(self.fail(&format!(
                        "pool '{name}': {key}: must be a value or a list of values"
                    )))
                }
            };
            entries.push(RawEntry { key, line, value });
        }
    }

    fn sequence(&mut self, name: &str, key: &str) -> Result<Vec<(String, usize)>, Failure> {
        let mut items = Vec::new();
        loop {
            match self.next()? {
                Event::SequenceEnd => return Ok(items),
                Event::Scalar(v, ..) => items.push((v, self.line)),
                _ => {
                    return Err(self.fail(&format!(
                        "pool '{name}': {key}: each entry must be a plain string"
                    )))
                }
            }
        }
    }
}
