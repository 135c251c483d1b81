//! The lexer: splits a template into text and action tokens, applying trim markers and dropping comments.

use super::*;

/// Kind and source, for turning byte offsets into positioned errors.
#[derive(Clone, Copy)]
pub(super) struct Ctx<'s> {
    pub(super) kind: TemplateKind,
    pub(super) src: &'s str,
}

impl Ctx<'_> {
    pub(super) fn line_col(&self, offset: usize) -> (usize, usize) {
        let before = &self.src[..offset.min(self.src.len())];
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        (line, column)
    }

    pub(super) fn syntax(&self, offset: usize, message: impl Into<String>) -> TemplateError {
        let (line, column) = self.line_col(offset);
        TemplateError::Syntax { kind: self.kind, line, column, message: message.into() }
    }

    pub(super) fn type_error(&self, offset: usize, message: impl Into<String>) -> TemplateError {
        let (line, column) = self.line_col(offset);
        TemplateError::Type { kind: self.kind, line, column, message: message.into() }
    }

    pub(super) fn render_error(&self, offset: usize, message: impl Into<String>) -> TemplateError {
        let (line, column) = self.line_col(offset);
        TemplateError::Render { kind: self.kind, line, column, message: message.into() }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Tok {
    Ident(String),
    /// One `.Name` segment; adjacent segments form a chain.
    Field(String),
    Dot,
    /// `$` or `$name`, including the `$`.
    Var(String),
    Str(String),
    Int(i64),
    LParen,
    RParen,
    Pipe,
    Comma,
    Declare,
    Assign,
}

#[derive(Debug, Clone)]
pub(super) struct Token {
    pub(super) tok: Tok,
    pub(super) start: usize,
    pub(super) end: usize,
}

pub(super) enum Segment {
    Text(String),
    Action { start: usize, tokens: Vec<Token> },
}

pub(super) fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

pub(super) fn is_ident(c: u8, first: bool) -> bool {
    c == b'_' || c.is_ascii_alphabetic() || (!first && c.is_ascii_digit())
}

pub(super) fn lex(ctx: Ctx<'_>) -> Result<Vec<Segment>, TemplateError> {
    let src = ctx.src;
    let bytes = src.as_bytes();
    let mut segments = Vec::new();
    let mut pos = 0;
    let mut trim_next_text = false;
    while pos < src.len() {
        let open = src[pos..].find("{{").map_or(src.len(), |i| pos + i);
        let mut text = &src[pos..open];
        if trim_next_text {
            text = text.trim_start_matches(|c: char| c.is_ascii() && is_space(c as u8));
        }
        // `{{- ` (dash then a space) trims the text before the action; `{{-3}}` is the number -3.
        let trim_before = open + 3 < src.len() && bytes[open + 2] == b'-' && is_space(bytes[open + 3]);
        if trim_before {
            text = text.trim_end_matches(|c: char| c.is_ascii() && is_space(c as u8));
        }
        if !text.is_empty() {
            segments.push(Segment::Text(text.to_owned()));
        }
        if open == src.len() {
            break;
        }
        let body = if trim_before { open + 3 } else { open + 2 };
        let (tokens, end, trim_after) = lex_action(ctx, open, body)?;
        if let Some(tokens) = tokens {
            segments.push(Segment::Action { start: open, tokens });
        }
        trim_next_text = trim_after;
        pos = end;
    }
    Ok(segments)
}

/// Lexes one action starting after `{{` / `{{- `. Returns its tokens (None for a comment), the offset after the
/// closing delimiter and whether that delimiter was ` -}}`.
pub(super) fn lex_action(
    ctx: Ctx<'_>,
    open: usize,
    mut pos: usize,
) -> Result<(Option<Vec<Token>>, usize, bool), TemplateError> {
    let src = ctx.src;
    let bytes = src.as_bytes();
    let unclosed = || ctx.syntax(open, "unclosed action: missing `}}`");
    let skip_space = |mut p: usize| {
        while p < bytes.len() && is_space(bytes[p]) {
            p += 1;
        }
        p
    };
    let close_at = |p: usize| -> Option<(usize, bool)> {
        if src[p..].starts_with("}}") {
            Some((p + 2, false))
        } else if p > 0 && is_space(bytes[p - 1]) && src[p..].starts_with("-}}") {
            Some((p + 3, true))
        } else {
            None
        }
    };

    let comment_start = skip_space(pos);
    if src[comment_start..].starts_with("/*") {
        let close =
            src[comment_start + 2..].find("*/").ok_or_else(|| ctx.syntax(open, "unclosed comment: missing `*/`"))?;
        let after = skip_space(comment_start + 2 + close + 2);
        return match close_at(after) {
            Some((end, trim)) => Ok((None, end, trim)),
            None => Err(ctx.syntax(open, "comment must be followed directly by `}}`")),
        };
    }

    let mut tokens = Vec::new();
    loop {
        pos = skip_space(pos);
        if pos >= bytes.len() {
            return Err(unclosed());
        }
        if let Some((end, trim)) = close_at(pos) {
            return Ok((Some(tokens), end, trim));
        }
        let start = pos;
        let c = bytes[pos];
        let tok = match c {
            b'"' => {
                let mut value = String::new();
                let mut chars = src[pos + 1..].char_indices();
                loop {
                    match chars.next() {
                        None | Some((_, '\n')) => return Err(ctx.syntax(start, "unterminated quoted string")),
                        Some((i, '"')) => {
                            pos += 1 + i + 1;
                            break;
                        }
                        Some((i, '\\')) => match chars.next() {
                            Some((_, '"')) => value.push('"'),
                            Some((_, '\\')) => value.push('\\'),
                            Some((_, 'n')) => value.push('\n'),
                            Some((_, 't')) => value.push('\t'),
                            Some((_, 'r')) => value.push('\r'),
                            _ => return Err(ctx.syntax(pos + 1 + i, "unsupported escape in quoted string")),
                        },
                        Some((_, ch)) => value.push(ch),
                    }
                }
                Tok::Str(value)
            }
            b'`' => {
                let close = src[pos + 1..].find('`').ok_or_else(|| ctx.syntax(start, "unterminated raw string"))?;
                let value = src[pos + 1..pos + 1 + close].to_owned();
                pos += close + 2;
                Tok::Str(value)
            }
            b'.' if bytes.get(pos + 1).is_some_and(|&b| is_ident(b, true)) => {
                let name = ident_at(bytes, pos + 1);
                pos += 1 + name.len();
                Tok::Field(name.to_owned())
            }
            b'.' => {
                pos += 1;
                Tok::Dot
            }
            b'$' => {
                let name = ident_at(bytes, pos + 1);
                pos += 1 + name.len();
                Tok::Var(format!("${name}"))
            }
            b'0'..=b'9' | b'-' | b'+' if c.is_ascii_digit() || bytes.get(pos + 1).is_some_and(u8::is_ascii_digit) => {
                let mut end = pos + 1;
                while end < bytes.len()
                    && (bytes[end].is_ascii_alphanumeric() || bytes[end] == b'.' || bytes[end] == b'_')
                {
                    end += 1;
                }
                let text = &src[pos..end];
                let n = text.parse::<i64>().map_err(|_| {
                    ctx.syntax(start, format!("invalid number `{text}`: only decimal integers are supported"))
                })?;
                pos = end;
                Tok::Int(n)
            }
            c if is_ident(c, true) => {
                let name = ident_at(bytes, pos);
                pos += name.len();
                Tok::Ident(name.to_owned())
            }
            b'(' | b')' | b'|' | b',' | b'=' => {
                pos += 1;
                match c {
                    b'(' => Tok::LParen,
                    b')' => Tok::RParen,
                    b'|' => Tok::Pipe,
                    b',' => Tok::Comma,
                    _ => Tok::Assign,
                }
            }
            b':' if bytes.get(pos + 1) == Some(&b'=') => {
                pos += 2;
                Tok::Declare
            }
            _ => {
                let ch = src[pos..].chars().next().unwrap_or('?');
                return Err(ctx.syntax(start, format!("unexpected `{ch}` in action")));
            }
        };
        tokens.push(Token { tok, start, end: pos });
    }
}

pub(super) fn ident_at(bytes: &[u8], start: usize) -> &str {
    let mut end = start;
    while end < bytes.len() && is_ident(bytes[end], end == start) {
        end += 1;
    }
    // Identifiers are ASCII, so this slice is on char boundaries.
    std::str::from_utf8(&bytes[start..end]).unwrap_or_default()
}
