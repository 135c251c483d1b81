//! The parser: builds the node tree; every node keeps its source offset for error positions.

use super::*;

#[derive(Debug, Clone)]
pub(super) enum Node {
    Text(String),
    /// `{{pipeline}}`: prints the result unless the pipeline declares or assigns a variable.
    Action(Pipeline),
    /// `if` and `with` chains: the first branch whose pipeline is truthy runs, else `otherwise`.
    Branches {
        keyword: Keyword,
        branches: Vec<(Pipeline, Vec<Node>)>,
        otherwise: Vec<Node>,
    },
    Range {
        pipe: Pipeline,
        body: Vec<Node>,
        otherwise: Vec<Node>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Keyword {
    If,
    With,
    Range,
}

impl Keyword {
    pub(super) fn name(self) -> &'static str {
        match self {
            Keyword::If => "if",
            Keyword::With => "with",
            Keyword::Range => "range",
        }
    }
}

#[derive(Debug, Clone)]
pub(super) struct Pipeline {
    pub(super) pos: usize,
    /// Offset of the declaration, for errors about its variables.
    pub(super) decl_pos: usize,
    /// Declared or assigned variables (`$x` or `$i, $r`).
    pub(super) vars: Vec<String>,
    /// `=` rather than `:=`.
    pub(super) assign: bool,
    pub(super) cmds: Vec<Command>,
}

#[derive(Debug, Clone)]
pub(super) struct Command {
    pub(super) pos: usize,
    pub(super) func: Option<Func>,
    pub(super) args: Vec<Term>,
    /// Static result type, filled in by the checker; gives `index` on a missing map key its zero value.
    pub(super) ty: Ty,
}

#[derive(Debug, Clone)]
pub(super) enum Term {
    Lit(Value),
    /// A value with an optional field chain: `.`, `.A.B`, `$x.A`, `(pipeline).A`.
    Path {
        pos: usize,
        base: Base,
        chain: Vec<Step>,
    },
}

#[derive(Debug, Clone)]
pub(super) enum Base {
    Dot,
    Var(String),
    Pipe(Box<Pipeline>),
}

#[derive(Debug, Clone)]
pub(super) struct Step {
    pub(super) name: String,
    pub(super) pos: usize,
    /// Static type after this step, filled in by the checker; gives missing fields their zero value.
    pub(super) ty: Ty,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Func {
    And,
    Or,
    Not,
    Len,
    Index,
    Printf,
    Print,
    Println,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

pub(super) const FUNCS: [(&str, Func); 14] = [
    ("and", Func::And),
    ("or", Func::Or),
    ("not", Func::Not),
    ("len", Func::Len),
    ("index", Func::Index),
    ("printf", Func::Printf),
    ("print", Func::Print),
    ("println", Func::Println),
    ("eq", Func::Eq),
    ("ne", Func::Ne),
    ("lt", Func::Lt),
    ("le", Func::Le),
    ("gt", Func::Gt),
    ("ge", Func::Ge),
];

impl Func {
    pub(super) fn name(self) -> &'static str {
        FUNCS.iter().find(|(_, f)| *f == self).map_or("?", |(n, _)| n)
    }
}

/// What one position of a command holds.
pub(super) enum Operand {
    Func(Func),
    Term(Term),
}

pub(super) enum Stop {
    Eof,
    End(usize),
    /// `{{else …}}` at this offset, with the tokens after `else`.
    Else(usize, Vec<Token>),
}

pub(super) struct Parser<'s> {
    pub(super) ctx: Ctx<'s>,
    pub(super) segments: Vec<Segment>,
    pub(super) next: usize,
}

impl Parser<'_> {
    /// Parses nodes until end of input, `{{end}}` or `{{else}}`.
    pub(super) fn parse_list(&mut self) -> Result<(Vec<Node>, Stop), TemplateError> {
        let mut nodes = Vec::new();
        while self.next < self.segments.len() {
            let segment = std::mem::replace(&mut self.segments[self.next], Segment::Text(String::new()));
            self.next += 1;
            let (start, tokens) = match segment {
                Segment::Text(text) => {
                    nodes.push(Node::Text(text));
                    continue;
                }
                Segment::Action { start, tokens } => (start, tokens),
            };
            let Some(first) = tokens.first() else {
                return Err(self.ctx.syntax(start, "empty action `{{}}`"));
            };
            let keyword = match &first.tok {
                Tok::Ident(word) => word.as_str(),
                _ => "",
            };
            match keyword {
                "if" | "with" | "range" => {
                    let kw = match keyword {
                        "if" => Keyword::If,
                        "with" => Keyword::With,
                        _ => Keyword::Range,
                    };
                    nodes.push(self.parse_control(kw, start, &tokens[1..])?);
                }
                "end" => {
                    if let Some(extra) = tokens.get(1) {
                        return Err(self.ctx.syntax(extra.start, "unexpected token after `end`"));
                    }
                    return Ok((nodes, Stop::End(start)));
                }
                "else" => return Ok((nodes, Stop::Else(start, tokens[1..].to_vec()))),
                "define" | "template" | "block" | "break" | "continue" => {
                    return Err(self
                        .ctx
                        .syntax(start, format!("`{{{{{keyword}}}}}` is not supported in commit templates")));
                }
                _ => nodes.push(Node::Action(self.parse_pipeline(start, &tokens, 1)?)),
            }
        }
        Ok((nodes, Stop::Eof))
    }

    pub(super) fn parse_control(&mut self, kw: Keyword, start: usize, tokens: &[Token]) -> Result<Node, TemplateError> {
        let max_vars = if kw == Keyword::Range { 2 } else { 1 };
        let mut branches = vec![(self.parse_pipeline(start, tokens, max_vars)?, Vec::new())];
        loop {
            let (body, stop) = self.parse_list()?;
            branches.last_mut().expect("at least one branch").1 = body;
            match stop {
                Stop::End(_) => break,
                Stop::Eof => {
                    return Err(self.ctx.syntax(start, format!("{{{{{}}}}} has no matching {{{{end}}}}", kw.name())));
                }
                Stop::Else(pos, rest) if rest.is_empty() => {
                    let (otherwise, stop) = self.parse_list()?;
                    return match stop {
                        Stop::End(_) => Ok(self.control_node(kw, branches, otherwise)),
                        Stop::Else(pos, _) => Err(self.ctx.syntax(pos, "unexpected {{else}} after {{else}}")),
                        Stop::Eof => {
                            Err(self.ctx.syntax(pos, format!("{{{{{}}}}} has no matching {{{{end}}}}", kw.name())))
                        }
                    };
                }
                Stop::Else(pos, rest) => {
                    // `{{else if …}}` / `{{else with …}}` continue the chain of the same keyword.
                    let chained = matches!(&rest[0].tok, Tok::Ident(w) if w == kw.name()) && kw != Keyword::Range;
                    if !chained {
                        return Err(self
                            .ctx
                            .syntax(pos, format!("{{{{else}}}} in {{{{{}}}}} can't take arguments here", kw.name())));
                    }
                    branches.push((self.parse_pipeline(pos, &rest[1..], 1)?, Vec::new()));
                }
            }
        }
        Ok(self.control_node(kw, branches, Vec::new()))
    }

    pub(super) fn control_node(
        &self,
        kw: Keyword,
        mut branches: Vec<(Pipeline, Vec<Node>)>,
        otherwise: Vec<Node>,
    ) -> Node {
        if kw == Keyword::Range {
            let (pipe, body) = branches.remove(0);
            Node::Range { pipe, body, otherwise }
        } else {
            Node::Branches { keyword: kw, branches, otherwise }
        }
    }

    /// Parses `[$a[, $b] := | $a =] cmd | cmd …`. `start` is the action's offset, for errors on empty pipelines.
    pub(super) fn parse_pipeline(
        &self,
        start: usize,
        tokens: &[Token],
        max_vars: usize,
    ) -> Result<Pipeline, TemplateError> {
        let mut rest = tokens;
        let mut vars = Vec::new();
        let mut assign = false;
        // A declaration is `$a :=`, `$a =` or `$a, $b :=` at the start; anything else is a plain pipeline.
        let mut candidates = Vec::new();
        while let Some(Token { tok: Tok::Var(name), .. }) = rest.get(candidates.len() * 2) {
            candidates.push(name.clone());
            match rest.get(candidates.len() * 2 - 1).map(|t| &t.tok) {
                Some(Tok::Comma) => {}
                Some(Tok::Declare | Tok::Assign) => {
                    assign = rest[candidates.len() * 2 - 1].tok == Tok::Assign;
                    rest = &rest[candidates.len() * 2..];
                    vars = candidates;
                    break;
                }
                _ => break,
            }
        }
        if vars.len() > max_vars {
            let message = match max_vars {
                0 => "variables can't be declared inside parentheses",
                1 => "only {{range}} can declare two variables",
                _ => "too many variables in declaration",
            };
            return Err(self.ctx.syntax(tokens[0].start, message));
        }
        if vars.iter().any(|v| v == "$") && !assign {
            return Err(self.ctx.syntax(tokens[0].start, "`$` can't be redeclared"));
        }
        let pos = rest.first().map_or(start, |t| t.start);
        if rest.is_empty() {
            return Err(self.ctx.syntax(start, "missing value in action"));
        }
        let mut cmds = Vec::new();
        for part in split_top_level(rest, |t| t.tok == Tok::Pipe) {
            let pos = part.first().map(|t| t.start);
            let Some(pos) = pos else {
                return Err(self.ctx.syntax(start, "missing command in pipeline"));
            };
            cmds.push(self.parse_command(pos, part)?);
        }
        for cmd in &cmds[1..] {
            if cmd.func.is_none() {
                return Err(self
                    .ctx
                    .syntax(cmd.pos, "only a function can receive a piped value, e.g. `| printf \"%s\"`"));
            }
        }
        Ok(Pipeline { pos, decl_pos: tokens[0].start, vars, assign, cmds })
    }

    pub(super) fn parse_command(&self, pos: usize, tokens: &[Token]) -> Result<Command, TemplateError> {
        let mut func = None;
        let mut args = Vec::new();
        let mut i = 0;
        while i < tokens.len() {
            let (operand, next) = self.parse_operand(tokens, i)?;
            match operand {
                Operand::Func(f) if i == 0 => func = Some(f),
                Operand::Func(f) => {
                    let name = f.name();
                    let message = format!("function `{name}` used as an argument; call it in parentheses: ({name} …)");
                    return Err(self.ctx.syntax(tokens[i].start, message));
                }
                Operand::Term(term) => args.push(term),
            }
            i = next;
        }
        if func.is_none() && args.len() > 1 {
            return Err(self.ctx.syntax(tokens[1].start, "only functions take arguments; is a function name missing?"));
        }
        Ok(Command { pos, func, args, ty: Ty::Any })
    }

    pub(super) fn func(&self, pos: usize, name: &str) -> Result<Func, TemplateError> {
        match name {
            "if" | "else" | "end" | "range" | "with" | "define" | "template" | "block" | "break" | "continue" => {
                Err(self.ctx.syntax(pos, format!("`{name}` must start its own action, e.g. {{{{{name} …}}}}")))
            }
            "nil" => Err(self.ctx.syntax(pos, "`nil` is not supported")),
            _ => FUNCS.iter().find(|(n, _)| *n == name).map(|(_, f)| *f).ok_or_else(|| {
                let available: Vec<&str> = FUNCS.iter().map(|(n, _)| *n).collect();
                self.ctx
                    .syntax(pos, format!("unknown function `{name}`; available functions: {}", available.join(", ")))
            }),
        }
    }

    /// Parses the operand at `tokens[i]` and returns the index after it.
    pub(super) fn parse_operand(&self, tokens: &[Token], i: usize) -> Result<(Operand, usize), TemplateError> {
        let token = &tokens[i];
        let literal = |value| Ok((Operand::Term(Term::Lit(value)), i + 1));
        let (base, mut next) = match &token.tok {
            Tok::Ident(w) if w == "true" || w == "false" => return literal(Value::Bool(w == "true")),
            Tok::Ident(name) => return Ok((Operand::Func(self.func(token.start, name)?), i + 1)),
            Tok::Str(s) => return literal(Value::Str(s.clone())),
            Tok::Int(n) => return literal(Value::Int(*n)),
            Tok::Dot => (Base::Dot, i + 1),
            // A leading `.Field` is a chain on dot; the field tokens are consumed below.
            Tok::Field(_) => (Base::Dot, i),
            Tok::Var(name) => (Base::Var(name.clone()), i + 1),
            Tok::LParen => {
                let mut depth = 0;
                let close = (i..tokens.len())
                    .find(|&j| {
                        match tokens[j].tok {
                            Tok::LParen => depth += 1,
                            Tok::RParen => depth -= 1,
                            _ => {}
                        }
                        depth == 0
                    })
                    .ok_or_else(|| self.ctx.syntax(token.start, "unclosed `(`"))?;
                let inner = self.parse_pipeline(token.start, &tokens[i + 1..close], 0)?;
                (Base::Pipe(Box::new(inner)), close + 1)
            }
            Tok::RParen => return Err(self.ctx.syntax(token.start, "unexpected `)`")),
            Tok::Pipe | Tok::Comma | Tok::Declare | Tok::Assign => {
                return Err(self
                    .ctx
                    .syntax(token.start, "unexpected operator; declarations look like {{$x := .Field}}"));
            }
        };
        let mut chain = Vec::new();
        // Fields bind only when written directly after the base: `.A.B`, `$x.A`, `(…).A`.
        let mut prev_end = if next == i { tokens[i].start } else { tokens[next - 1].end };
        while let Some(Token { tok: Tok::Field(name), start, end }) = tokens.get(next) {
            if *start != prev_end {
                break;
            }
            chain.push(Step { name: name.clone(), pos: *start, ty: Ty::Any });
            prev_end = *end;
            next += 1;
        }
        Ok((Operand::Term(Term::Path { pos: token.start, base, chain }), next))
    }
}

/// Splits at separators outside parentheses.
pub(super) fn split_top_level(tokens: &[Token], is_sep: impl Fn(&Token) -> bool) -> Vec<&[Token]> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, token) in tokens.iter().enumerate() {
        match token.tok {
            Tok::LParen => depth += 1,
            Tok::RParen => depth -= 1,
            _ if depth == 0 && is_sep(token) => {
                parts.push(&tokens[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&tokens[start..]);
    parts
}
