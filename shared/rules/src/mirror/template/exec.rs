//! The evaluator: renders a checked node tree with Go's semantics.

use super::*;

pub(super) struct Exec<'s> {
    pub(super) ctx: Ctx<'s>,
    pub(super) out: String,
    pub(super) vars: Vec<(String, Value)>,
}

impl Exec<'_> {
    pub(super) fn nodes(&mut self, nodes: &[Node], dot: &Value) -> Result<(), TemplateError> {
        for node in nodes {
            match node {
                Node::Text(text) => self.out.push_str(text),
                Node::Action(pipe) => {
                    let value = self.pipeline(pipe, dot)?;
                    if pipe.vars.is_empty() {
                        write!(self.out, "{value}").expect("writing to a String cannot fail");
                    }
                }
                Node::Branches { keyword, branches, otherwise } => {
                    let mark = self.vars.len();
                    let mut taken = false;
                    for (pipe, body) in branches {
                        let value = self.pipeline(pipe, dot)?;
                        if value.is_truthy() {
                            let inner_dot = if *keyword == Keyword::With { &value } else { dot };
                            self.nodes(body, inner_dot)?;
                            taken = true;
                            break;
                        }
                    }
                    if !taken {
                        self.nodes(otherwise, dot)?;
                    }
                    self.vars.truncate(mark);
                }
                Node::Range { pipe, body, otherwise } => {
                    let mark = self.vars.len();
                    let value = self.pipeline_value(pipe, dot)?;
                    let items: Vec<(Value, Value)> = match value {
                        Value::List(items) => items.into_iter().enumerate().map(|(i, v)| (Value::from(i), v)).collect(),
                        Value::Map(map) => map.into_iter().map(|(k, v)| (Value::Str(k), v)).collect(),
                        Value::Int(n) => (0..n.max(0)).map(|i| (Value::Int(i), Value::Int(i))).collect(),
                        other => {
                            let message = format!("can't range over a {}", other.type_name());
                            return Err(self.ctx.render_error(pipe.pos, message));
                        }
                    };
                    if items.is_empty() {
                        self.nodes(otherwise, dot)?;
                    }
                    for (key, elem) in items {
                        match pipe.vars.as_slice() {
                            [v] => self.vars.push((v.clone(), elem.clone())),
                            [k, v] => {
                                self.vars.push((k.clone(), key));
                                self.vars.push((v.clone(), elem.clone()));
                            }
                            _ => {}
                        }
                        self.nodes(body, &elem)?;
                        self.vars.truncate(mark);
                    }
                }
            }
        }
        Ok(())
    }

    /// Evaluates a pipeline and binds its declared or assigned variable.
    pub(super) fn pipeline(&mut self, pipe: &Pipeline, dot: &Value) -> Result<Value, TemplateError> {
        let value = self.pipeline_value(pipe, dot)?;
        for var in &pipe.vars {
            if pipe.assign {
                if let Some(slot) = self.vars.iter_mut().rev().find(|(name, _)| name == var) {
                    slot.1 = value.clone();
                }
            } else {
                self.vars.push((var.clone(), value.clone()));
            }
        }
        Ok(value)
    }

    pub(super) fn pipeline_value(&mut self, pipe: &Pipeline, dot: &Value) -> Result<Value, TemplateError> {
        let mut value = None;
        for cmd in &pipe.cmds {
            value = Some(self.command(cmd, dot, value)?);
        }
        Ok(value.expect("parser rejects empty pipelines"))
    }

    pub(super) fn command(&mut self, cmd: &Command, dot: &Value, piped: Option<Value>) -> Result<Value, TemplateError> {
        let Some(func) = cmd.func else {
            return self.term(&cmd.args[0], dot);
        };
        if matches!(func, Func::And | Func::Or) {
            return self.short_circuit(cmd, func == Func::And, dot, piped);
        }
        let mut args = Vec::with_capacity(cmd.args.len() + 1);
        for term in &cmd.args {
            args.push(self.term(term, dot)?);
        }
        args.extend(piped);
        self.call(cmd, func, args)
    }

    /// `and` returns the first falsy argument, `or` the first truthy one, else the last; later ones are not evaluated.
    pub(super) fn short_circuit(
        &mut self,
        cmd: &Command,
        and: bool,
        dot: &Value,
        piped: Option<Value>,
    ) -> Result<Value, TemplateError> {
        let mut last = None;
        for term in &cmd.args {
            let value = self.term(term, dot)?;
            if value.is_truthy() != and {
                return Ok(value);
            }
            last = Some(value);
        }
        Ok(piped.or(last).expect("the checker requires at least one argument"))
    }

    pub(super) fn call(&self, cmd: &Command, func: Func, mut args: Vec<Value>) -> Result<Value, TemplateError> {
        let fail = |message: String| Err(self.ctx.render_error(cmd.pos, format!("{}: {message}", func.name())));
        match func {
            Func::And | Func::Or => unreachable!("evaluated lazily in `command`"),
            Func::Not => Ok(Value::Bool(!args[0].is_truthy())),
            Func::Len => match &args[0] {
                Value::Str(s) => Ok(Value::from(s.len())),
                Value::List(l) => Ok(Value::from(l.len())),
                Value::Map(m) => Ok(Value::from(m.len())),
                other => fail(format!("len of a {}", other.type_name())),
            },
            Func::Index => {
                let mut value = args.remove(0);
                for key in args {
                    value = match (value, key) {
                        (Value::List(mut items), Value::Int(i)) => {
                            match usize::try_from(i).ok().filter(|&i| i < items.len()) {
                                Some(i) => items.swap_remove(i),
                                None => return fail(format!("index out of range: {i} (length {})", items.len())),
                            }
                        }
                        (Value::Map(mut map), Value::Str(k)) => match map.remove(&k) {
                            Some(v) => v,
                            None => match cmd.ty.zero() {
                                Some(zero) => zero,
                                None => return fail(format!("map has no key \"{k}\"")),
                            },
                        },
                        (container, key) => {
                            return fail(format!("can't index a {} with a {}", container.type_name(), key.type_name()));
                        }
                    };
                }
                Ok(value)
            }
            Func::Printf => {
                let format = match args.remove(0) {
                    Value::Str(s) => s,
                    other => return fail(format!("format must be a string, not a {}", other.type_name())),
                };
                Ok(Value::Str(sprintf(&format, &args)))
            }
            Func::Print => Ok(Value::Str(go_print(&args))),
            Func::Println => {
                let line = args.iter().map(ToString::to_string).collect::<Vec<_>>().join(" ");
                Ok(Value::Str(line + "\n"))
            }
            Func::Eq | Func::Ne => {
                let first = &args[0];
                let mut equal = false;
                for other in &args[1..] {
                    if std::mem::discriminant(first) != std::mem::discriminant(other)
                        || matches!(first, Value::List(_) | Value::Map(_))
                    {
                        return fail(format!("can't compare a {} with a {}", first.type_name(), other.type_name()));
                    }
                    equal |= first == other;
                }
                Ok(Value::Bool(equal == (func == Func::Eq)))
            }
            Func::Lt | Func::Le | Func::Gt | Func::Ge => {
                let ordering = match (&args[0], &args[1]) {
                    (Value::Int(a), Value::Int(b)) => a.cmp(b),
                    (Value::Str(a), Value::Str(b)) => a.cmp(b),
                    (a, b) => return fail(format!("can't compare a {} with a {}", a.type_name(), b.type_name())),
                };
                Ok(Value::Bool(match func {
                    Func::Lt => ordering.is_lt(),
                    Func::Le => ordering.is_le(),
                    Func::Gt => ordering.is_gt(),
                    _ => ordering.is_ge(),
                }))
            }
        }
    }

    pub(super) fn term(&mut self, term: &Term, dot: &Value) -> Result<Value, TemplateError> {
        let (pos, base, chain) = match term {
            Term::Lit(value) => return Ok(value.clone()),
            Term::Path { pos, base, chain } => (*pos, base, chain),
        };
        let mut value = match base {
            Base::Dot => dot.clone(),
            Base::Var(name) => match self.vars.iter().rev().find(|(n, _)| n == name) {
                Some((_, value)) => value.clone(),
                None => return Err(self.ctx.render_error(pos, format!("undefined variable `{name}`"))),
            },
            Base::Pipe(pipe) => {
                let mark = self.vars.len();
                let value = self.pipeline(pipe, dot)?;
                self.vars.truncate(mark);
                value
            }
        };
        for step in chain {
            value = match value {
                Value::Map(mut map) => match map.remove(&step.name) {
                    Some(v) => v,
                    None => step.ty.zero().ok_or_else(|| {
                        self.ctx.render_error(step.pos, format!("no field .{} in the data", step.name))
                    })?,
                },
                other => {
                    let message = format!("can't read field .{} of a {}", step.name, other.type_name());
                    return Err(self.ctx.render_error(step.pos, message));
                }
            };
        }
        Ok(value)
    }
}

/// Go's `fmt.Sprint`: spaces only between operands when neither is a string.
pub(super) fn go_print(args: &[Value]) -> String {
    let mut out = String::new();
    for (i, arg) in args.iter().enumerate() {
        if i > 0 && !matches!(arg, Value::Str(_)) && !matches!(args[i - 1], Value::Str(_)) {
            out.push(' ');
        }
        write!(out, "{arg}").expect("writing to a String cannot fail");
    }
    out
}

/// Go's `fmt.Sprintf` for `%v %s %d %q %t %%` with `-`/`0` flags, width and precision (`%.3s` truncates); other
/// verbs and mismatched arguments render like Go does (`%!d(string=x)`).
pub(super) fn sprintf(format: &str, args: &[Value]) -> String {
    let mut out = String::new();
    let mut args = args.iter();
    let mut chars = format.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let left = chars.next_if_eq(&'-').is_some();
        let zero = !left && chars.next_if_eq(&'0').is_some();
        let mut width = 0usize;
        while let Some(d) = chars.peek().and_then(|d| d.to_digit(10)) {
            width = width * 10 + d as usize;
            chars.next();
        }
        let mut precision = None;
        if chars.next_if_eq(&'.').is_some() {
            let mut p = 0usize;
            while let Some(d) = chars.peek().and_then(|d| d.to_digit(10)) {
                p = p * 10 + d as usize;
                chars.next();
            }
            precision = Some(p);
        }
        let Some(verb) = chars.next() else {
            out.push_str("%!(NOVERB)");
            break;
        };
        if verb == '%' {
            out.push('%');
            continue;
        }
        let Some(arg) = args.next() else {
            write!(out, "%!{verb}(MISSING)").expect("writing to a String cannot fail");
            continue;
        };
        let text = match (verb, arg) {
            ('v' | 's', Value::Str(s)) => s.chars().take(precision.unwrap_or(usize::MAX)).collect(),
            ('q', Value::Str(s)) => {
                format!("{:?}", s.chars().take(precision.unwrap_or(usize::MAX)).collect::<String>())
            }
            ('v', _) | ('d', Value::Int(_)) | ('t', Value::Bool(_)) => arg.to_string(),
            _ => format!("%!{verb}({}={arg})", arg.type_name()),
        };
        let pad = width.saturating_sub(text.chars().count());
        if zero && matches!((verb, arg), ('d' | 'v', Value::Int(_))) {
            // Zeros go between the sign and the digits: `%04d` of -3 is `-003`.
            let (sign, digits) = text.split_at(usize::from(text.starts_with('-')));
            out.push_str(sign);
            out.extend(std::iter::repeat_n('0', pad));
            out.push_str(digits);
        } else if left {
            out.push_str(&text);
            out.extend(std::iter::repeat_n(' ', pad));
        } else {
            out.extend(std::iter::repeat_n(' ', pad));
            out.push_str(&text);
        }
    }
    let extra: Vec<String> = args.map(|a| format!("{}={a}", a.type_name())).collect();
    if !extra.is_empty() {
        write!(out, "%!(EXTRA {})", extra.join(", ")).expect("writing to a String cannot fail");
    }
    out
}
