//! Spanned compile errors.

use proc_macro2::{Ident, Span, TokenStream};
use quote::ToTokens;
use std::fmt;

/// A source range: the first and last token of a construct. On stable Rust a proc macro
/// cannot join spans, so errors carry both ends and rustc underlines everything between.
#[derive(Clone, Copy, Debug)]
pub struct Sp {
    pub start: Span,
    pub end: Span,
}

impl Sp {
    /// The range of a syntax node's tokens.
    pub fn of(node: &impl ToTokens) -> Sp {
        let mut tokens = node.to_token_stream().into_iter();
        let start = tokens
            .next()
            .map(|t| t.span())
            .unwrap_or_else(Span::call_site);
        let end = tokens.last().map(|t| t.span()).unwrap_or(start);
        Sp { start, end }
    }

    /// From the start of `self` to the end of `other`.
    pub fn to(self, other: Sp) -> Sp {
        Sp {
            start: self.start,
            end: other.end,
        }
    }
}

impl From<Span> for Sp {
    fn from(span: Span) -> Sp {
        Sp {
            start: span,
            end: span,
        }
    }
}

/// One error in a kernel, at the span of the offending tokens.
#[derive(Clone, Debug)]
pub struct CodegenError {
    /// Where the offending construct starts.
    pub span: Span,
    /// Where it ends.
    pub end: Span,
    /// What is wrong and how to fix it.
    pub message: String,
}

impl CodegenError {
    /// A new error.
    pub fn new(span: impl Into<Sp>, message: impl Into<String>) -> CodegenError {
        let sp = span.into();
        CodegenError {
            span: sp.start,
            end: sp.end,
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
        // Two tokens carrying the two ends make `compile_error!` cover the whole range.
        let mut ends = TokenStream::new();
        ends.extend([
            Ident::new("start", self.span).into_token_stream(),
            Ident::new("end", self.end).into_token_stream(),
        ]);
        syn::Error::new_spanned(ends, &self.message).to_compile_error()
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
    pub fn push(&mut self, span: impl Into<Sp>, message: impl Into<String>) {
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
