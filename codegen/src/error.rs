//! Spanned compile errors.

use proc_macro2::{Span, TokenStream};
use std::fmt;

/// One error in a kernel, at the span of the offending tokens.
#[derive(Clone, Debug)]
pub struct CodegenError {
    pub span: Span,
    pub message: String,
}

impl CodegenError {
    /// A new error.
    pub fn new(span: Span, message: impl Into<String>) -> CodegenError {
        CodegenError {
            span,
            message: message.into(),
        }
    }

    /// 1-based line of the span's start (0 where spans carry no location).
    pub fn line(&self) -> usize {
        self.span.start().line
    }

    /// 0-based column of the span's start.
    pub fn column(&self) -> usize {
        self.span.start().column
    }

    /// `compile_error!` at the span.
    pub fn to_compile_error(&self) -> TokenStream {
        syn::Error::new(self.span, &self.message).to_compile_error()
    }
}

impl fmt::Display for CodegenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.line(), self.column() + 1, self.message)
    }
}

impl std::error::Error for CodegenError {}

impl From<syn::Error> for CodegenError {
    fn from(e: syn::Error) -> CodegenError {
        CodegenError::new(e.span(), e.to_string())
    }
}

/// Collects errors so one pass reports as many as it can.
#[derive(Default, Debug)]
pub struct Errors {
    list: Vec<CodegenError>,
}

impl Errors {
    /// Record an error.
    pub fn push(&mut self, span: Span, message: impl Into<String>) {
        self.list.push(CodegenError::new(span, message));
    }

    /// Whether none were recorded.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// The recorded errors.
    pub fn into_vec(self) -> Vec<CodegenError> {
        self.list
    }

    /// Append another collection.
    pub fn extend(&mut self, other: Vec<CodegenError>) {
        self.list.extend(other);
    }
}
