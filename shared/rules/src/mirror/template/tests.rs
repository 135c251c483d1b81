use super::*;

fn resource(group: &str, version: &str, resource: &str, namespace: &str, name: &str) -> Value {
    Value::map([
        ("Group", group),
        ("Version", version),
        ("Resource", resource),
        ("Namespace", namespace),
        ("Name", name),
    ])
}

fn event() -> Value {
    Value::map([
        ("Operation", "UPDATE"),
        ("Group", "apps"),
        ("Version", "v1"),
        ("Resource", "deployments"),
        ("Namespace", "prod"),
        ("Name", "web"),
        ("APIVersion", "apps/v1"),
        ("Username", "alice"),
        ("GitTarget", "prod-cluster"),
    ])
}

fn group() -> Value {
    Value::map([
        ("Author", Value::from("alice")),
        ("GitTarget", Value::from("prod-cluster")),
        ("Count", Value::from(3i64)),
        ("Operations", Value::map([("CREATE", 2i64), ("DELETE", 1)])),
        (
            "Resources",
            Value::List(vec![
                resource("apps", "v1", "deployments", "prod", "web"),
                resource("", "v1", "configmaps", "prod", "web-config"),
                resource("", "v1", "namespaces", "", "prod"),
            ]),
        ),
    ])
}

fn reconcile(count: i64, resource: &str, revision: &str) -> Value {
    Value::map([
        ("Count", Value::from(count)),
        ("GitTarget", Value::from("prod-cluster")),
        ("Group", Value::from("")),
        ("Version", Value::from("")),
        ("Resource", Value::from(resource)),
        ("APIVersion", Value::from("")),
        ("Revision", Value::from(revision)),
    ])
}

#[track_caller]
fn render(kind: TemplateKind, source: &str, context: &Value) -> String {
    let template = Template::parse(source, kind).unwrap_or_else(|e| panic!("{source:?} failed to parse: {e}"));
    template.render(context).unwrap_or_else(|e| panic!("{source:?} failed to render: {e}"))
}

#[track_caller]
fn ev(source: &str) -> String {
    render(TemplateKind::Event, source, &event())
}

#[track_caller]
fn gr(source: &str) -> String {
    render(TemplateKind::Group, source, &group())
}

#[track_caller]
fn parse_err(kind: TemplateKind, source: &str) -> TemplateError {
    match Template::parse(source, kind) {
        Ok(_) => panic!("{source:?} parsed but should not"),
        Err(e) => e,
    }
}

/// Asserts the error's Display has the kind, the position and `needle`.
#[track_caller]
fn assert_err(err: &TemplateError, line: usize, column: usize, needle: &str) {
    let msg = err.to_string();
    assert!(msg.contains(&format!("line {line}, column {column}: ")), "wrong position in: {msg}");
    assert!(msg.contains(needle), "`{needle}` not in: {msg}");
}

// --- text, fields, printing ---

#[test]
fn plain_text_and_empty_templates() {
    assert_eq!(ev(""), "");
    assert_eq!(ev("no actions } here {"), "no actions } here {");
}

#[test]
fn every_event_variable_renders() {
    assert_eq!(
        ev("{{.Operation}} {{.Group}} {{.Version}} {{.Resource}} {{.Namespace}} {{.Name}} \
            {{.APIVersion}} {{.Username}} {{.GitTarget}}"),
        "UPDATE apps v1 deployments prod web apps/v1 alice prod-cluster"
    );
}

#[test]
fn dot_dollar_and_values_print_like_go() {
    assert_eq!(gr("{{.Count}} {{.Operations}} {{$.Author}}"), "3 map[CREATE:2 DELETE:1] alice");
    assert_eq!(gr("{{with .Author}}{{.}}{{end}}"), "alice");
    assert_eq!(gr("{{index .Operations \"CREATE\" | printf \"%v\"}} {{true}} {{-7}}"), "2 true -7");
}

#[test]
fn missing_context_fields_render_as_zero_values() {
    let sparse = Value::map([("Author", "bob")]);
    let source = "{{.Author}}|{{.Count}}|{{.GitTarget}}|{{len .Resources}}|\
                  {{.Operations.CREATE}}|{{index .Operations \"UPDATE\"}}";
    assert_eq!(render(TemplateKind::Group, source, &sparse), "bob|0||0|0|0");
    let partial = Value::map([("Resources", vec![Value::map([("Name", "x")])])]);
    assert_eq!(render(TemplateKind::Group, "{{range .Resources}}[{{.Group}}|{{.Name}}]{{end}}", &partial), "[|x]");
}

// --- control structures ---

#[test]
fn if_else_if_else_uses_go_truthiness() {
    let src = "{{if .Revision}}rev{{else if .Resource}}res{{else if .Count}}count{{else}}none{{end}}";
    assert_eq!(render(TemplateKind::Reconcile, src, &reconcile(0, "", "42")), "rev");
    assert_eq!(render(TemplateKind::Reconcile, src, &reconcile(0, "pods", "")), "res");
    assert_eq!(render(TemplateKind::Reconcile, src, &reconcile(5, "", "")), "count");
    assert_eq!(render(TemplateKind::Reconcile, src, &reconcile(0, "", "")), "none");
    assert_eq!(gr("{{if .Resources}}list{{end}}{{if .Operations}} map{{end}}"), "list map");
    let empty = Value::map([("Resources", Value::List(vec![])), ("Operations", Value::Map(BTreeMap::new()))]);
    assert_eq!(
        render(TemplateKind::Group, "{{if .Resources}}list{{else}}no list{{end}}{{if .Operations}}!{{end}}", &empty),
        "no list"
    );
    assert_eq!(ev("{{if false}}a{{else}}b{{end}}{{if true}}c{{end}}"), "bc");
}

#[test]
fn nested_ifs_close_in_order() {
    assert_eq!(ev("{{if .Name}}<{{if .Group}}g{{else}}core{{end}}>{{end}}"), "<g>");
}

#[test]
fn range_over_resources_with_fields_variables_and_root() {
    assert_eq!(
        gr("{{range .Resources}}{{.Resource}}/{{.Name}} {{end}}"),
        "deployments/web configmaps/web-config namespaces/prod "
    );
    assert_eq!(
        gr("{{range $i, $r := .Resources}}{{$i}}={{$r.Name}}@{{$.GitTarget}};{{end}}"),
        "0=web@prod-cluster;1=web-config@prod-cluster;2=prod@prod-cluster;"
    );
    assert_eq!(gr("{{range $r := .Resources}}{{$r.Version}}{{end}}"), "v1v1v1");
}

#[test]
fn range_else_runs_for_empty_lists() {
    let empty = Value::map([("Resources", Value::List(vec![]))]);
    assert_eq!(render(TemplateKind::Group, "{{range .Resources}}x{{else}}nothing{{end}}", &empty), "nothing");
    assert_eq!(gr("{{range .Resources}}x{{else}}nothing{{end}}"), "xxx");
}

#[test]
fn range_over_map_is_in_key_order_and_over_int_counts() {
    assert_eq!(gr("{{range $op, $n := .Operations}}{{$op}}:{{$n}} {{end}}"), "CREATE:2 DELETE:1 ");
    assert_eq!(gr("{{range .Operations}}{{.}}{{end}}"), "21");
    assert_eq!(gr("{{range .Count}}{{.}}{{end}}"), "012");
}

#[test]
fn with_sets_dot_and_supports_else_with_and_else() {
    assert_eq!(ev("{{with .Namespace}}ns={{.}}{{else}}cluster{{end}}"), "ns=prod");
    let no_ns = Value::map([("Namespace", ""), ("Username", "alice")]);
    assert_eq!(
        render(
            TemplateKind::Event,
            "{{with .Namespace}}ns={{.}}{{else with .Username}}by {{.}}{{else}}?{{end}}",
            &no_ns
        ),
        "by alice"
    );
    assert_eq!(gr("{{with index .Resources 0}}{{.Group}}/{{.Version}}{{end}}"), "apps/v1");
}

#[test]
fn variables_declare_assign_and_scope_like_go() {
    assert_eq!(ev("{{$n := .Name}}{{$n}}-{{$n}}"), "web-web");
    // Assignment inside a block changes the outer variable.
    assert_eq!(ev("{{$x := 1}}{{if true}}{{$x = 2}}{{end}}{{$x}}"), "2");
    assert_eq!(ev("{{if $ns := .Namespace}}{{$ns}}{{end}}"), "prod");
    let err = parse_err(TemplateKind::Event, "{{if true}}{{$x := 1}}{{end}}{{$x}}");
    assert_err(&err, 1, 32, "undefined variable `$x`");
    assert_err(&parse_err(TemplateKind::Event, "{{$y = 1}}"), 1, 3, "undefined variable `$y`");
}

// --- functions and pipelines ---

#[test]
fn len_and_index() {
    assert_eq!(gr("{{len .Resources}} {{len .Operations}} {{len .Author}}"), "3 2 5");
    assert_eq!(
        gr("{{index .Resources 1 | printf \"%v\"}}"),
        "map[Group: Name:web-config Namespace:prod Resource:configmaps Version:v1]"
    );
    assert_eq!(
        gr("{{(index .Resources 2).Resource}} {{index .Operations \"DELETE\"}} {{index .Operations \"UPDATE\"}}"),
        "namespaces 1 0"
    );
    let err = Template::parse("{{index .Resources 7}}", TemplateKind::Group).unwrap().render(&group()).unwrap_err();
    assert!(matches!(err, TemplateError::Render { line: 1, column: 3, .. }), "{err:?}");
    assert!(err.to_string().contains("index out of range: 7 (length 3)"), "{err}");
}

#[test]
fn printf_verbs_width_and_go_style_mistakes() {
    assert_eq!(
        ev("{{printf \"%s/%s %d %v %q %t %%\" .Resource .Name 42 .Version .Name true}}"),
        "deployments/web 42 v1 \"web\" true %"
    );
    assert_eq!(
        ev("[{{printf \"%6s|%-6s|%3d|%04d|%5.2s|%.1q\" .Name .Name 7 -3 .Name .Name}}]"),
        "[   web|web   |  7|-003|   we|\"w\"]"
    );
    assert_eq!(ev("{{printf \"%x\" 255}}"), "%!x(int=255)");
    assert_eq!(ev("{{printf \"%d\" .Name}}"), "%!d(string=web)");
    assert_eq!(ev("{{printf \"%s %s\" .Name}}"), "web %!s(MISSING)");
    assert_eq!(ev("{{printf \"%s\" .Name .Group}}"), "web%!(EXTRA string=apps)");
}

#[test]
fn print_and_println() {
    assert_eq!(gr("{{print .Author .Count 1 2}}"), "alice3 1 2");
    assert_eq!(gr("{{println .Author .Count}}"), "alice 3\n");
}

#[test]
fn comparisons() {
    assert_eq!(
        gr("{{eq .Count 3}} {{eq .Count 1 2 3}} {{ne .Author \"bob\"}} {{eq .Author \"bob\"}}"),
        "true true true false"
    );
    assert_eq!(
        gr("{{lt .Count 4}} {{le .Count 3}} {{gt .Count 3}} {{ge .Count 3}} {{lt \"a\" \"b\"}}"),
        "true true false true true"
    );
    assert_eq!(gr("{{if gt .Count 1}}changes{{else}}change{{end}}"), "changes");
}

#[test]
fn and_or_not_return_values_and_short_circuit() {
    assert_eq!(ev("{{or .Group \"core\"}} {{and .Group .Name}} {{not .Name}} {{not \"\"}}"), "apps web false true");
    let core = Value::map([("Group", "")]);
    assert_eq!(render(TemplateKind::Event, "{{or .Group \"core\"}}|{{and .Group .Name}}|", &core), "core||");
    // The out-of-range index is never evaluated.
    assert_eq!(gr("{{and false (index .Resources 99)}} {{or true (index .Resources 99)}}"), "false true");
    assert_eq!(gr("{{.Author | and true}} {{\"\" | or .Author}}"), "alice alice");
}

#[test]
fn pipelines_pass_the_value_as_last_argument() {
    assert_eq!(ev("{{.Name | printf \"%s!\"}}"), "web!");
    assert_eq!(gr("{{.Resources | len | printf \"%03d\"}}"), "003");
    assert_eq!(gr("{{.Count | eq 3}}"), "true");
    assert_eq!(ev("{{printf \"%s-%s\" .Name (.Group | printf \"[%s]\")}}"), "web-[apps]");
}

// --- lexical details ---

#[test]
fn trim_markers_remove_adjacent_whitespace() {
    assert_eq!(ev("a  \n {{- .Name -}} \n\t b"), "awebb");
    assert_eq!(ev("a {{- .Name}} b"), "aweb b");
    assert_eq!(ev("{{-3}} {{- -3 -}} x"), "-3-3x");
    let src = "{{.Author}}:\n{{- range .Resources}}\n  - {{.Name}}\n{{- end}}\n";
    assert_eq!(gr(src), "alice:\n  - web\n  - web-config\n  - prod\n");
}

#[test]
fn comments_render_nothing_and_can_trim() {
    assert_eq!(ev("a{{/* comment with }} inside */}}b"), "ab");
    assert_eq!(ev("a \n{{- /* trimmed */ -}}\n b"), "ab");
    assert_err(&parse_err(TemplateKind::Event, "{{/* never closed }}"), 1, 1, "unclosed comment");
    assert_err(&parse_err(TemplateKind::Event, "{{/* c */ .Name}}"), 1, 1, "comment must be followed directly by `}}`");
}

#[test]
fn string_literals_may_contain_delimiters_and_escapes() {
    assert_eq!(ev("{{printf \"%s}}{{\" .Name}}"), "web}}{{");
    assert_eq!(ev("{{\"a\\\"b\\\\c\\td\"}}"), "a\"b\\c\td");
    assert_eq!(ev("{{`raw \\n {{ }}`}}"), "raw \\n {{ }}");
    assert_eq!(ev("{{\"multi\\nline\"}}"), "multi\nline");
}

#[test]
fn realistic_multiline_group_message() {
    let src = "{{.Author}}: {{.Count}} change(s) to {{.GitTarget}}\n\n\
               {{range .Resources -}}\n\
               - {{if .Group}}{{.Group}}/{{end}}{{.Version}} {{.Resource}} {{if .Namespace}}\
               {{.Namespace}}/{{end}}{{.Name}}\n\
               {{end -}}\n\
               {{with .Operations}}({{range $op, $n := .}}{{$op}}={{$n}} {{end}}){{end}}";
    let expected = "alice: 3 change(s) to prod-cluster\n\n\
                    - apps/v1 deployments prod/web\n\
                    - v1 configmaps prod/web-config\n\
                    - v1 namespaces prod\n\
                    (CREATE=2 DELETE=1 )";
    assert_eq!(gr(src), expected);
}

// --- defaults ---

#[test]
fn default_templates_parse_and_render() {
    // gitops-reverser's defaults, internal/git/types.go:110-126 at f0f7b42.
    assert_eq!(
        Template::default_for(TemplateKind::Event).render(&event()).unwrap(),
        "[UPDATE] apps/v1/deployments/web"
    );
    let cluster_scoped =
        Value::map([("Operation", "CREATE"), ("APIVersion", "v1"), ("Resource", "namespaces"), ("Name", "prod")]);
    assert_eq!(
        Template::default_for(TemplateKind::Event).render(&cluster_scoped).unwrap(),
        "[CREATE] v1/namespaces/prod"
    );

    let group_tmpl = Template::default_for(TemplateKind::Group);
    assert_eq!(group_tmpl.render(&group()).unwrap(), "alice on prod-cluster: 3 resource(s)");
    let one =
        Value::map([("Author", Value::from("bob")), ("GitTarget", Value::from("t")), ("Count", Value::from(1i64))]);
    assert_eq!(group_tmpl.render(&one).unwrap(), "bob on t: 1 resource(s)");

    let rec = Template::default_for(TemplateKind::Reconcile);
    assert_eq!(
        rec.render(&reconcile(12, "deployments", "42")).unwrap(),
        "reconciled 12 deployments (last resourceVersion: 42)"
    );
    assert_eq!(rec.render(&reconcile(1, "", "")).unwrap(), "reconciled 1 resources");
    assert_eq!(rec.kind(), TemplateKind::Reconcile);

    // The newer upstream's liveTemplate default, over the group variables.
    let live = Template::default_for(TemplateKind::Live);
    let with_ops = Value::map([
        ("Count", Value::from(1i64)),
        (
            "Resources",
            Value::List(vec![Value::map([
                ("Operation", "DELETE"),
                ("APIVersion", "v1"),
                ("Resource", "configmaps"),
                ("Namespace", "prod"),
                ("Name", "web"),
            ])]),
        ),
    ]);
    assert_eq!(live.render(&with_ops).unwrap(), "chore: sync 1 resource\n\n- [DELETE] v1/configmaps/prod/web\n");
}

// --- validation: unknown fields ---

#[test]
fn unknown_top_level_field_names_field_kind_and_variables() {
    let err = parse_err(TemplateKind::Group, "{{.Autor}}");
    assert_eq!(
        err.to_string(),
        "groupTemplate line 1, column 3: unknown field `.Autor`; groupTemplate provides \
         .Author, .GitTarget, .Count, .Operations, .Resources"
    );
    assert!(matches!(&err, TemplateError::UnknownField { kind: TemplateKind::Group, field, .. } if field == ".Autor"));
}

#[test]
fn unknown_field_position_counts_lines_and_characters() {
    let err = parse_err(TemplateKind::Event, "first line\nsecond: ünïcode {{.Name}} {{.Nmae}}");
    assert_err(&err, 2, 29, "unknown field `.Nmae`; eventTemplate provides .Operation, .Group, .Version");
}

#[test]
fn fields_of_other_kinds_are_rejected() {
    assert_err(&parse_err(TemplateKind::Event, "{{.Revision}}"), 1, 3, "unknown field `.Revision`; eventTemplate");
    assert_err(&parse_err(TemplateKind::Reconcile, "{{.Name}}"), 1, 3, "reconcileTemplate provides .Count, .GitTarget");
    assert_err(&parse_err(TemplateKind::Group, "{{if .Namespace}}x{{end}}"), 1, 6, "unknown field `.Namespace`");
}

#[test]
fn unknown_fields_inside_range_with_variables_and_parens() {
    let nested = "unknown field `.Nme`; a .Resources element provides .Group, .Version, .Resource, .Namespace, .Name";
    assert_err(&parse_err(TemplateKind::Group, "{{range .Resources}}{{.Nme}}{{end}}"), 1, 23, nested);
    assert_err(&parse_err(TemplateKind::Group, "{{range $r := .Resources}}{{$r.Nme}}{{end}}"), 1, 31, nested);
    assert_err(&parse_err(TemplateKind::Group, "{{(index .Resources 0).Nme}}"), 1, 23, nested);
    assert_err(&parse_err(TemplateKind::Group, "{{with index .Resources 0}}{{.Nme}}{{end}}"), 1, 30, nested);
    // `$` is the root even inside range.
    assert_err(
        &parse_err(TemplateKind::Group, "{{range .Resources}}{{$.Name}}{{end}}"),
        1,
        24,
        "groupTemplate provides",
    );
}

#[test]
fn unknown_operation_keys_are_rejected() {
    let keys = ".Operations provides CREATE, UPDATE, DELETE";
    assert_err(
        &parse_err(TemplateKind::Group, "{{.Operations.CREAT}}"),
        1,
        14,
        &format!("unknown field `.CREAT`; {keys}"),
    );
    assert_err(
        &parse_err(TemplateKind::Group, "{{index .Operations \"create\"}}"),
        1,
        3,
        &format!("unknown field `\"create\"`; {keys}"),
    );
}

#[test]
fn fields_of_scalars_and_bad_ranges_are_type_errors() {
    let err = parse_err(TemplateKind::Event, "{{.Name.First}}");
    assert!(matches!(err, TemplateError::Type { .. }), "{err:?}");
    assert_err(&err, 1, 8, "can't read field .First of a string");
    assert_err(&parse_err(TemplateKind::Event, "{{range .Name}}{{end}}"), 1, 9, "can't range over a string");
    assert_err(
        &parse_err(TemplateKind::Group, "{{if eq .Count \"3\"}}{{end}}"),
        1,
        6,
        "eq can't compare an int with a string",
    );
    assert_err(&parse_err(TemplateKind::Group, "{{eq .Resources 1}}"), 1, 3, "eq can't compare a list");
    assert_err(&parse_err(TemplateKind::Group, "{{len .Count}}"), 1, 3, "len of an int");
    assert_err(&parse_err(TemplateKind::Group, "{{not}}"), 1, 3, "wrong number of arguments for not: want 1, got 0");
    assert_err(&parse_err(TemplateKind::Group, "{{index .Resources \"a\"}}"), 1, 3, "can't index a list with a string");
    assert_err(&parse_err(TemplateKind::Group, "{{printf .Count}}"), 1, 3, "printf format must be a string");
}

// --- syntax errors ---

#[test]
fn unclosed_action_reports_where_it_opened() {
    let err = parse_err(TemplateKind::Event, "ok {{.Name}}\n  {{.Name");
    assert!(matches!(err, TemplateError::Syntax { line: 2, column: 3, .. }), "{err:?}");
    assert_eq!(err.to_string(), "eventTemplate line 2, column 3: unclosed action: missing `}}`");
    assert_err(&parse_err(TemplateKind::Event, "{{printf \"}}\""), 1, 1, "unclosed action");
}

#[test]
fn unknown_function_lists_available_ones() {
    let err = parse_err(TemplateKind::Event, "{{.Name}}\n{{lower .Name}}");
    assert_err(&err, 2, 3, "unknown function `lower`; available functions: and, or, not, len, index, printf");
    assert_err(&parse_err(TemplateKind::Event, "{{.Name | upper}}"), 1, 11, "unknown function `upper`");
}

#[test]
fn block_structure_errors() {
    assert_err(&parse_err(TemplateKind::Event, "x\n{{if .Name}}y"), 2, 1, "{{if}} has no matching {{end}}");
    assert_err(&parse_err(TemplateKind::Event, "{{range .Name}}{{else}}"), 1, 16, "{{range}} has no matching {{end}}");
    assert_err(&parse_err(TemplateKind::Event, "a{{end}}"), 1, 2, "unexpected {{end}}");
    assert_err(&parse_err(TemplateKind::Event, "{{else}}"), 1, 1, "unexpected {{else}}");
    assert_err(
        &parse_err(TemplateKind::Event, "{{if .Name}}{{else}}{{else}}{{end}}"),
        1,
        21,
        "unexpected {{else}} after {{else}}",
    );
    assert_err(
        &parse_err(TemplateKind::Group, "{{range .Resources}}{{else if .Count}}{{end}}"),
        1,
        21,
        "can't take arguments",
    );
    assert_err(
        &parse_err(TemplateKind::Event, "{{if .Name}}{{else with .Name}}{{end}}"),
        1,
        13,
        "can't take arguments",
    );
    assert_err(&parse_err(TemplateKind::Event, "{{if .Name}}{{end .Name}}"), 1, 19, "unexpected token after `end`");
    assert_err(&parse_err(TemplateKind::Event, "{{if}}{{end}}"), 1, 1, "missing value in action");
}

#[test]
fn malformed_actions() {
    assert_err(&parse_err(TemplateKind::Event, "{{}}"), 1, 1, "empty action");
    assert_err(&parse_err(TemplateKind::Event, "{{.Name .Group}}"), 1, 9, "only functions take arguments");
    assert_err(
        &parse_err(TemplateKind::Event, "{{.Name | .Group}}"),
        1,
        11,
        "only a function can receive a piped value",
    );
    assert_err(&parse_err(TemplateKind::Event, "{{printf \"%d\" len}}"), 1, 15, "function `len` used as an argument");
    assert_err(&parse_err(TemplateKind::Event, "{{\"open}}"), 1, 3, "unterminated quoted string");
    assert_err(&parse_err(TemplateKind::Event, "{{1.5}}"), 1, 3, "only decimal integers are supported");
    assert_err(&parse_err(TemplateKind::Event, "{{.Name @}}"), 1, 9, "unexpected `@`");
    assert_err(&parse_err(TemplateKind::Event, "{{(.Name}}"), 1, 3, "unclosed `(`");
    assert_err(&parse_err(TemplateKind::Event, "{{template \"x\"}}"), 1, 1, "`{{template}}` is not supported");
    assert_err(
        &parse_err(TemplateKind::Event, "{{$a, $b := .Name}}"),
        1,
        3,
        "only {{range}} can declare two variables",
    );
    assert_err(&parse_err(TemplateKind::Event, "{{$ := .Name}}"), 1, 3, "`$` can't be redeclared");
    assert_err(&parse_err(TemplateKind::Event, "{{nil}}"), 1, 3, "`nil` is not supported");
    assert_err(&parse_err(TemplateKind::Event, "{{$nope}}"), 1, 3, "undefined variable `$nope`");
}

// --- render context ---

#[test]
fn context_with_wrong_types_is_a_caller_error() {
    let template = Template::parse("{{.Count}}", TemplateKind::Group).unwrap();
    let err = template.render(&Value::map([("Count", "3")])).unwrap_err();
    assert_eq!(err.to_string(), "groupTemplate: render context field `.Count` should be an int but is string");
    let bad_resource = Value::map([("Resources", vec![Value::map([("Name", 1i64)])])]);
    assert!(
        template.render(&bad_resource).unwrap_err().to_string().contains("`.Resources[0].Name` should be a string")
    );
    assert!(template.render(&Value::from("x")).unwrap_err().to_string().contains("field `.` should be a map"));
}

#[test]
fn kind_metadata() {
    assert_eq!(
        TemplateKind::Reconcile.variables(),
        [
            "Count",
            "GitTarget",
            "Group",
            "Version",
            "Resource",
            "APIVersion",
            "Namespace",
            "Revision",
            "ResourceVersion"
        ]
    );
    assert_eq!(TemplateKind::Event.to_string(), "eventTemplate");
}
