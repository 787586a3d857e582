//! `pgas-run` library code (in progress).
