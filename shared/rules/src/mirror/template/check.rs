//! The checker: resolves every field and variable against the kind's schema and annotates static types.

use super::*;

pub(super) struct Checker<'s> {
    pub(super) ctx: Ctx<'s>,
    pub(super) root: Ty,
    pub(super) vars: Vec<(String, Ty)>,
}

impl Checker<'_> {
    pub(super) fn check_nodes(&mut self, nodes: &mut [Node], dot: Ty) -> Result<(), TemplateError> {
        for node in nodes {
            match node {
                Node::Text(_) => {}
                Node::Action(pipe) => {
                    self.check_pipeline(pipe, dot)?;
                }
                Node::Branches { keyword, branches, otherwise } => {
                    let mark = self.vars.len();
                    for (pipe, body) in branches {
                        let ty = self.check_pipeline(pipe, dot)?;
                        let inner_dot = if *keyword == Keyword::With { ty } else { dot };
                        let inner = self.vars.len();
                        self.check_nodes(body, inner_dot)?;
                        self.vars.truncate(inner);
                    }
                    self.check_nodes(otherwise, dot)?;
                    self.vars.truncate(mark);
                }
                Node::Range { pipe, body, otherwise } => {
                    let mark = self.vars.len();
                    let vars = std::mem::take(&mut pipe.vars);
                    let ty = self.check_pipeline(pipe, dot)?;
                    pipe.vars = vars;
                    let (key, elem) = match ty {
                        Ty::List(elem) => (Ty::Int, *elem),
                        Ty::Map(map) => (Ty::Str, map.value),
                        Ty::Int => (Ty::Int, Ty::Int),
                        Ty::Any => (Ty::Any, Ty::Any),
                        other => {
                            return Err(self.ctx.type_error(pipe.pos, format!("can't range over {}", other.name())));
                        }
                    };
                    match pipe.vars.as_slice() {
                        [v] => self.vars.push((v.clone(), elem)),
                        [k, v] => {
                            self.vars.push((k.clone(), key));
                            self.vars.push((v.clone(), elem));
                        }
                        _ => {}
                    }
                    self.check_nodes(body, elem)?;
                    self.vars.truncate(mark);
                    self.check_nodes(otherwise, dot)?;
                }
            }
        }
        Ok(())
    }

    /// Checks a pipeline and declares its variables in the current scope.
    pub(super) fn check_pipeline(&mut self, pipe: &mut Pipeline, dot: Ty) -> Result<Ty, TemplateError> {
        let mut ty = None;
        for cmd in &mut pipe.cmds {
            ty = Some(self.check_command(cmd, dot, ty)?);
        }
        let ty = ty.unwrap_or(Ty::Any);
        for var in &pipe.vars {
            if pipe.assign {
                let slot = self.vars.iter_mut().rev().find(|(name, _)| name == var);
                let Some((_, var_ty)) = slot else {
                    return Err(self
                        .ctx
                        .syntax(pipe.decl_pos, format!("undefined variable `{var}`; declare it with `{var} :=`")));
                };
                if !var_ty.same(ty) {
                    *var_ty = Ty::Any;
                }
            } else {
                self.vars.push((var.clone(), ty));
            }
        }
        Ok(ty)
    }

    pub(super) fn check_command(&mut self, cmd: &mut Command, dot: Ty, piped: Option<Ty>) -> Result<Ty, TemplateError> {
        let mut arg_tys = Vec::with_capacity(cmd.args.len() + 1);
        for arg in &mut cmd.args {
            arg_tys.push(self.check_term(arg, dot)?);
        }
        arg_tys.extend(piped);
        let ty = match cmd.func {
            None => arg_tys[0],
            Some(func) => self.check_call(cmd, func, &arg_tys)?,
        };
        cmd.ty = ty;
        Ok(ty)
    }

    pub(super) fn check_call(&self, cmd: &Command, func: Func, args: &[Ty]) -> Result<Ty, TemplateError> {
        let arity = |ok: bool, want: &str| {
            if ok {
                Ok(())
            } else {
                let message = format!("wrong number of arguments for {}: want {want}, got {}", func.name(), args.len());
                Err(self.ctx.type_error(cmd.pos, message))
            }
        };
        match func {
            Func::And | Func::Or => {
                arity(!args.is_empty(), "at least 1")?;
                Ok(if args.iter().all(|t| t.same(args[0])) { args[0] } else { Ty::Any })
            }
            Func::Not => arity(args.len() == 1, "1").map(|()| Ty::Bool),
            Func::Len => {
                arity(args.len() == 1, "1")?;
                match args[0] {
                    Ty::Int | Ty::Bool => Err(self.ctx.type_error(cmd.pos, format!("len of {}", args[0].name()))),
                    _ => Ok(Ty::Int),
                }
            }
            Func::Index => {
                arity(!args.is_empty(), "at least 1")?;
                let mut ty = args[0];
                for (i, key) in args[1..].iter().enumerate() {
                    ty = match (ty, key) {
                        (Ty::List(elem), Ty::Int | Ty::Any) => *elem,
                        (Ty::Map(map), Ty::Str | Ty::Any) => {
                            // A literal key can be checked like a field.
                            if let Some(Term::Lit(Value::Str(k))) = cmd.args.get(i + 1)
                                && !map.keys.contains(&k.as_str())
                            {
                                return Err(self.unknown(cmd.pos, format!("\"{k}\""), map.name, map.keys));
                            }
                            map.value
                        }
                        (Ty::Any, _) => Ty::Any,
                        (container, key) => {
                            let message = format!("can't index {} with {}", container.name(), key.name());
                            return Err(self.ctx.type_error(cmd.pos, message));
                        }
                    };
                }
                Ok(ty)
            }
            Func::Printf => {
                arity(!args.is_empty(), "at least 1")?;
                match args[0] {
                    Ty::Str | Ty::Any => Ok(Ty::Str),
                    other => Err(self
                        .ctx
                        .type_error(cmd.pos, format!("printf format must be a string, not {}", other.name()))),
                }
            }
            Func::Print | Func::Println => Ok(Ty::Str),
            Func::Eq | Func::Ne | Func::Lt | Func::Le | Func::Gt | Func::Ge => {
                if func == Func::Eq {
                    arity(args.len() >= 2, "at least 2")?;
                } else {
                    arity(args.len() == 2, "2")?;
                }
                for ty in args {
                    let comparable = match func {
                        Func::Eq | Func::Ne => ty.basic().is_some(),
                        _ => matches!(ty, Ty::Str | Ty::Int),
                    };
                    if !comparable && !matches!(ty, Ty::Any) {
                        let message = format!("{} can't compare {}", func.name(), ty.name());
                        return Err(self.ctx.type_error(cmd.pos, message));
                    }
                    if let (Some(a), Some(b)) = (args[0].basic(), ty.basic())
                        && a != b
                    {
                        let message = format!("{} can't compare {} with {}", func.name(), args[0].name(), ty.name());
                        return Err(self.ctx.type_error(cmd.pos, message));
                    }
                }
                Ok(Ty::Bool)
            }
        }
    }

    pub(super) fn check_term(&mut self, term: &mut Term, dot: Ty) -> Result<Ty, TemplateError> {
        let (pos, base, chain) = match term {
            Term::Lit(Value::Str(_)) => return Ok(Ty::Str),
            Term::Lit(Value::Int(_)) => return Ok(Ty::Int),
            Term::Lit(_) => return Ok(Ty::Bool),
            Term::Path { pos, base, chain } => (*pos, base, chain),
        };
        let mut ty = match base {
            Base::Dot => dot,
            Base::Var(name) if name == "$" => self.root,
            Base::Var(name) => match self.vars.iter().rev().find(|(n, _)| n == name) {
                Some((_, ty)) => *ty,
                None => return Err(self.ctx.syntax(pos, format!("undefined variable `{name}`"))),
            },
            Base::Pipe(pipe) => {
                let mark = self.vars.len();
                let ty = self.check_pipeline(pipe, dot)?;
                self.vars.truncate(mark);
                ty
            }
        };
        for step in chain {
            ty = match ty {
                Ty::Struct(st) => match st.fields.iter().find(|(n, _)| *n == step.name) {
                    Some((_, field_ty)) => *field_ty,
                    None => {
                        let names: Vec<&str> = st.fields.iter().map(|(n, _)| *n).collect();
                        return Err(self.unknown(step.pos, format!(".{}", step.name), st.name, &names));
                    }
                },
                Ty::Map(map) if map.keys.contains(&step.name.as_str()) => map.value,
                Ty::Map(map) => return Err(self.unknown(step.pos, format!(".{}", step.name), map.name, map.keys)),
                Ty::Any => Ty::Any,
                other => {
                    let message = format!("can't read field .{} of {}", step.name, other.name());
                    return Err(self.ctx.type_error(step.pos, message));
                }
            };
            step.ty = ty;
        }
        Ok(ty)
    }

    pub(super) fn unknown(&self, pos: usize, field: String, owner: &str, names: &[&str]) -> TemplateError {
        let (line, column) = self.ctx.line_col(pos);
        let prefix = if owner.starts_with('.') { "" } else { "." };
        let available = names.iter().map(|n| format!("{prefix}{n}")).collect::<Vec<_>>().join(", ");
        TemplateError::UnknownField { kind: self.ctx.kind, line, column, field, owner: owner.to_owned(), available }
    }
}
