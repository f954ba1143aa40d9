//! The stats twemproxy describes (`nc_stats.h`), in its order, with its
//! descriptions: what `--describe-stats` prints and the JSON's field order.

/// Per pool: name, description.
pub(crate) const POOL: &[(&str, &str)] = &[
    ("client_eof", "# eof on client connections"),
    ("client_err", "# errors on client connections"),
    ("client_connections", "# active client connections"),
    ("server_ejects", "# times backend server was ejected"),
    ("forward_error", "# times we encountered a forwarding error"),
    (
        "fragments",
        "# fragments created from a multi-vector request",
    ),
];

/// Per server: name, description.
pub(crate) const SERVER: &[(&str, &str)] = &[
    ("server_eof", "# eof on server connections"),
    ("server_err", "# errors on server connections"),
    ("server_timedout", "# timeouts on server connections"),
    ("server_connections", "# active server connections"),
    (
        "server_ejected_at",
        "timestamp when server was ejected in usec since epoch",
    ),
    ("requests", "# requests"),
    ("request_bytes", "total request bytes"),
    ("responses", "# responses"),
    ("response_bytes", "total response bytes"),
    ("in_queue", "# requests in incoming queue"),
    ("in_queue_bytes", "current request bytes in incoming queue"),
    ("out_queue", "# requests in outgoing queue"),
    ("out_queue_bytes", "current request bytes in outgoing queue"),
];
