//! pgas macros.
