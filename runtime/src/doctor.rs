//! `pgas doctor` (in progress).
