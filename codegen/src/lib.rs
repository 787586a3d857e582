//! pgas kernel compiler.
