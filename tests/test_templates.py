"""Template rendering through pipeline.templates.render: each engine's features, missing
variables kept as written, and the real Semantic Kernel and PPE templates."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.sources.yaml_text import load_yaml
from pipeline.templates import (
    ENGINES,
    Rendered,
    RenderLimits,
    TemplateError,
    UnrenderableTemplate,
    UnsafeTemplate,
    engine_name,
    render,
)

CUSTOMER = {"firstName": "Ann", "age": 30}
HISTORY = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]


def text(template: str, engine: str, **variables: object) -> str:
    return render(template, engine, variables).text


# --- the API -----------------------------------------------------------------------------


def test_engines_and_aliases():
    assert set(ENGINES) == {
        "jinja2",
        "hf",
        "handlebars",
        "liquid",
        "semantic-kernel",
        "golang",
        "fstring",
    }
    aliases = {
        "huggingface": "hf",
        "localai": "golang",
        "ollama": "golang",
        "python": "fstring",
        "f-string": "fstring",
        "langchain": "fstring",
        "jinja": "jinja2",
        "Handlebars": "handlebars",
    }
    for alias, name in aliases.items():
        assert engine_name(alias) == name
    with pytest.raises(UnrenderableTemplate, match="unknown template format 'mustache'"):
        engine_name("mustache")


def test_render_returns_text_and_missing_names_in_order():
    rendered = render("{{ b }} {{ a }} {{ b }}", "jinja2", {})
    assert rendered == Rendered("{{ b }} {{ a }} {{ b }}", ("b", "a"))
    assert RenderLimits() == RenderLimits(1_000_000, 2.0, 100_000)


def test_errors_carry_construct_and_line():
    with pytest.raises(TemplateError) as caught:
        render("line one\n{% if x %}", "jinja2", {})
    assert caught.value.line == 2
    assert "(line 2)" in str(caught.value)
    assert caught.value.construct == "{% if x %}"
    assert issubclass(UnrenderableTemplate, TemplateError)
    assert issubclass(UnsafeTemplate, TemplateError)


def test_rendering_does_not_change_the_callers_variables():
    variables = {"items": [1, 2]}
    with pytest.raises(UnsafeTemplate):
        render("{{ items.append(3) }}", "jinja2", variables)
    assert variables == {"items": [1, 2]}


# --- jinja2 --------------------------------------------------------------------------------


def test_jinja2_renders_values_as_python_prints_them():
    template = "{{ name }} {{ n + 1 }} {{ flag }} {{ none }} {{ items }} {{ d }} {{ name|upper }}"
    result = text(template, "jinja2", name="Ann", n=1, flag=True, none=None, items=[1], d={"k": 1})
    assert result == "Ann 2 True None [1] {'k': 1} ANN"


def test_jinja2_control_flow_macros_and_loop_controls():
    template = (
        "{% macro greet(who) %}hi {{ who }}{% endmacro %}"
        "{% for m in history %}{% if loop.last %}{% break %}{% endif %}"
        "{{ m.role }}:{{ m.content }};{% endfor %}{{ greet('you') }}"
    )
    assert text(template, "jinja2", history=HISTORY) == "user:hi;hi you"


def test_jinja2_missing_values_keep_the_placeholder_as_written():
    rendered = render(
        "A {{name}} B {{ customer.firstName }} C {{- nope -}} D", "jinja2", {"customer": {}}
    )
    assert rendered.text == "A {{name}} B {{ customer.firstName }} C{{- nope -}}D"
    assert rendered.missing == ("name", "customer.firstName", "nope")


def test_jinja2_missing_values_are_false_and_iterate_as_empty():
    template = "{% if topic %}yes{% else %}no{% endif %}{% for x in items %}x{% endfor %}."
    assert render(template, "jinja2", {}) == Rendered("no.", ())


def test_jinja2_missing_inside_a_loop_item_names_the_expression():
    rendered = render(
        "{% for m in history %}{{ m.name }};{% endfor %}", "jinja2", {"history": HISTORY}
    )
    assert rendered == Rendered("{{ m.name }};{{ m.name }};", ("m.name",))


def test_jinja2_calls_of_unknown_functions_are_unrenderable_even_in_loops_not_run():
    template = "Repeat {% for item in chat_history %}{{ message(item) }}{% endfor %}"
    with pytest.raises(UnrenderableTemplate) as caught:
        render(template, "jinja2", {})
    assert caught.value.construct == "message(item)"
    assert caught.value.line == 1


def test_jinja2_names_a_dotted_call_as_written():
    with pytest.raises(UnrenderableTemplate) as caught:
        render('Now:\n  {{ time . now( "utc" ) }}', "jinja2", {})
    assert caught.value.construct == 'time . now( "utc" )'
    assert caught.value.line == 2


def test_jinja2_builtins_and_template_bound_names_may_be_called():
    template = (
        "{% set ns = namespace(n=0) %}{% for i in range(3) %}{% set ns.n = ns.n + i %}"
        "{% endfor %}{{ ns.n }} {{ dict(a=1) }} {{ name.strip() }}"
    )
    assert text(template, "jinja2", name=" x ") == "3 {'a': 1} x"


@pytest.mark.parametrize(
    ("template", "construct"),
    [
        ("{% include 'header.txt' %}", "{% include 'header.txt' %}"),
        ("{% extends 'base.html' %}", "{% extends 'base.html' %}"),
        ("{% from 'm.j2' import f %}", "{% from 'm.j2' import f %}"),
        ("{{ x | shout }}", "|shout"),
        ("{% if x is odd_enough %}{% endif %}", "is odd_enough"),
        ("{% do x.append(1) %}", "{% do x.append(1) %}"),
        ("{{ lipsum() }}", "lipsum()"),
        ("{{ x|random }}", "|random"),
    ],
)
def test_jinja2_loader_tags_custom_filters_tags_and_random_builtins_are_unrenderable(
    template, construct
):
    with pytest.raises(UnrenderableTemplate) as caught:
        render(template, "jinja2", {"x": [1]})
    assert caught.value.construct == construct


def test_jinja2_runtime_errors_name_the_line():
    with pytest.raises(TemplateError) as caught:
        render("ok\n{{ name + 1 }}", "jinja2", {"name": "a"})
    assert type(caught.value) is TemplateError
    assert caught.value.line == 2
    assert caught.value.construct == "{{ name + 1 }}"


# --- hf ------------------------------------------------------------------------------------


def test_hf_length_of_strings_lists_and_dicts():
    template = "{{ s.length }} {{ l.length }} {{ d.length }} {{ d2.length }}"
    result = text(template, "hf", s="abcd", l=[1, 2], d={"a": 1}, d2={"length": "own"})
    assert result == "4 2 1 own"


def test_hf_prints_values_as_javascript_and_knows_null():
    template = "{{ t }} {{ f }} {{ n }} {{ i }} {{ x }} {{ l }} {{ d }} {{ null is none }}"
    result = text(template, "hf", t=True, f=False, n=None, i=1.0, x=1.5, l=["a", 2], d={"k": 1})
    assert result == 'true false  1 1.5 a,2 {"k": 1} true'


def test_hf_trims_blocks_like_huggingface_jinja_and_missing_compares_false():
    template = "{% if missing.length > 3 %}\nlong\n{% else %}\n  short\n{% endif %}\n"
    assert text(template, "hf") == "  short\n"


def test_hf_raise_exception_fails_the_render_with_its_message():
    with pytest.raises(TemplateError, match="the template raised: bad role"):
        render("{{ raise_exception('bad role') }}", "hf", {})


def test_hf_renders_the_ppe_rewriter_user_message(data: Path):
    """The multi-line Jinja user message of a PPE library script (tests/data's hand-written
    stand-in of offline-ai's lib/translator.ai.yaml): `{% if %}` on inputs given or not,
    `content.length`, `|trim` and whitespace control, short and long content."""
    source = (data / "formats/ppe/lib__rewriter.ai.yaml").read_text(encoding="utf-8")
    start = source.index("        Rewrite with care")
    end = source.index("    - --- # the dialogue starts here")
    template = "\n".join(line[8:] for line in source[start:end].splitlines())
    short = {
        "content": "Pls send the report asap.",
        "tone": "formal",
        "completion_delimiter": "<|D|>",
    }
    assert render(template, "hf", short) == Rendered(
        'Rewrite with care and finish before the delimiter "<|D|>".\n'
        'Rewrite `"Pls send the report asap."` in a formal tone.\n'
        "Pls send the report asap.",
        (),
    )
    long = dict(
        short,
        content="  " + "word " * 45,
        audience="the board",
        tone="friendly",
        glossary="asap=as soon as possible",
    )
    result = text(template, "hf", **long)
    assert "Keep these words as they are:\nasap=as soon as possible\n" in result
    assert result.endswith(
        "Rewrite the following text for the board in a friendly tone.\n---\n"
        + ("word " * 45).strip()
    )


# --- handlebars ------------------------------------------------------------------------------


def test_handlebars_paths_each_and_standalone_lines():
    template = (
        "Name: {{customer.firstName}} ({{customer.age}})\n"
        "{{#each history}}\n"
        '<message role="{{role}}">{{content}}</message>\n'
        "{{/each}}\n"
        "end"
    )
    result = text(template, "handlebars", customer=CUSTOMER, history=HISTORY)
    assert result == (
        "Name: Ann (30)\n"
        '<message role="user">hi</message>\n'
        '<message role="assistant">hello</message>\n'
        "end"
    )


def test_handlebars_each_data_variables_block_params_and_else():
    template = (
        "{{#each items}}{{@index}}={{this}}{{#if @first}}^{{/if}}{{#if @last}}${{/if}} {{/each}}"
        "{{#each d as |value key|}}{{key}}:{{value}};{{/each}}"
        "{{#each none}}x{{else}}empty{{/each}}"
    )
    assert text(template, "handlebars", items=["a", "b"], d={"k": 1}) == "0=a^ 1=b$ k:1;empty"


def test_handlebars_if_unless_with_and_else_if_chains():
    template = (
        "{{#if zero}}a{{else if flag}}b{{else}}c{{/if}}"
        "{{#unless flag}}u{{else}}U{{/unless}}"
        "{{#with customer}}{{firstName}}/{{../flag}}/{{@root.flag}}{{/with}}"
        "{{#with none}}w{{else}}W{{/with}}"
    )
    assert text(template, "handlebars", zero=0, flag=True, customer=CUSTOMER) == "bUAnn/true/trueW"


def test_handlebars_raw_comments_whitespace_control_and_escaped_braces():
    template = "{{! note }}{{!-- a }} b --}}<{{{html}}}> <{{html}}>  {{~flag~}}  \\{{kept}}"
    assert text(template, "handlebars", html="<b>", flag=False) == "<<b>> <<b>>false{{kept}}"


def test_handlebars_prints_values_as_javascript():
    template = "{{n}} {{f}} {{t}} {{l}} {{d}} [{{z}}] {{l.length}}"
    result = text(template, "handlebars", n=2.0, f=0.5, t=True, l=[1, "a"], d={"a": 1}, z=None)
    assert result == '2 0.5 true 1,a {"a": 1} [] 2'


def test_handlebars_missing_values_keep_the_placeholder():
    rendered = render(
        "{{customer.lastName}} {{#each history}}{{name}}{{/each}}",
        "handlebars",
        {"customer": CUSTOMER, "history": HISTORY[:1]},
    )
    assert rendered == Rendered("{{customer.lastName}} {{name}}", ("customer.lastName", "name"))


@pytest.mark.parametrize(
    "template",
    [
        "{{json x}}",
        '{{#message role="user"}}hi{{/message}}',
        '{{set "x" 1}}',
        "{{> header}}",
        "{{lookup items 0}}",
        "{{#unknownHelper}}x{{/unknownHelper}}",
    ],
)
def test_handlebars_helpers_are_unrenderable_named_as_written(template):
    with pytest.raises(UnrenderableTemplate) as caught:
        render(template, "handlebars", {"x": 1, "items": [1]})
    assert caught.value.construct == template.split("}}")[0] + "}}"


def test_handlebars_syntax_errors_name_the_tag_and_line():
    with pytest.raises(TemplateError) as caught:
        render("a\n{{#if x}}\n{{/each}}", "handlebars", {})
    assert caught.value.construct == "{{/each}}"
    assert caught.value.line == 3


# --- semantic-kernel -----------------------------------------------------------------------


def test_semantic_kernel_variables_values_and_escapes():
    template = (
        "{{$topic}} {{ $topic }} {{ \"{{\" }}x{{ '}}' }} {{ 'it\\'s' }} {{ \"a\\\\b\" }} {{ }}"
    )
    assert text(template, "semantic-kernel", topic="cats") == "cats cats {{x}} it's a\\b {{ }}"


def test_semantic_kernel_prints_values_as_python_sk():
    template = "{{$n}}|{{$b}}|{{$none}}|{{$l}}"
    assert text(template, "semantic-kernel", n=1.5, b=True, none=None, l=[1]) == "1.5|True||[1]"


def test_semantic_kernel_missing_variables_keep_the_placeholder_as_written():
    rendered = render("About {{$topic}} in {{ $length }}.", "semantic-kernel", {})
    assert rendered == Rendered("About {{$topic}} in {{ $length }}.", ("topic", "length"))


@pytest.mark.parametrize(
    "template",
    ["{{time.now}}", "{{plugin.function $arg}}", '{{fn "x" name=$y}}', "{{ search 'a b' }}"],
)
def test_semantic_kernel_function_calls_are_unrenderable_named_as_written(template):
    with pytest.raises(UnrenderableTemplate) as caught:
        render("Before {{$a}}.\n" + template, "semantic-kernel", {"a": 1})
    assert caught.value.construct == template
    assert caught.value.line == 2


@pytest.mark.parametrize("template", ["{{$a b}}", "{{$}}", "{{'x' 'y'}}", "{{ f 'a'b }}"])
def test_semantic_kernel_syntax_errors(template):
    with pytest.raises(TemplateError) as caught:
        render(template, "semantic-kernel", {"a": 1})
    assert type(caught.value) is TemplateError
    assert caught.value.construct == template


# --- liquid --------------------------------------------------------------------------------


def test_liquid_renders_with_filters_and_loops():
    template = (
        "{{ customer.firstName | upcase }} {% for m in history %}{{ forloop.index }}:{{ m.role }} "
        "{% endfor %}{{ items | join: ', ' }} {{ flag }}[{{ none }}]"
    )
    result = text(
        template, "liquid", customer=CUSTOMER, history=HISTORY, items=[1, 2], flag=True, none=None
    )
    assert result == "ANN 1:user 2:assistant 1, 2 true[]"


def test_liquid_missing_values_keep_the_statement_as_written():
    rendered = render(
        "Hi {{customer.lastName}} {{ nope }} {% if nope %}x{% endif %}{% for m in none %}y{% endfor %}",
        "liquid",
        {"customer": CUSTOMER},
    )
    assert rendered == Rendered(
        "Hi {{customer.lastName}} {{ nope }} ", ("customer.lastName", "nope")
    )


@pytest.mark.parametrize(
    ("template", "construct"),
    [
        ("{% if false %}{{ x | shout }}{% endif %}", "| shout"),
        ("{% include 'header' %}", "{% include 'header' %}"),
        ("{% render 'card' %}", "{% render 'card' %}"),
        ("{% mytag %}", "{% mytag %}"),
        ("{{ 'now' | date: '%Y' }}", "'now' | date"),
    ],
)
def test_liquid_custom_filters_tags_loaders_and_the_clock_are_unrenderable(template, construct):
    with pytest.raises(UnrenderableTemplate) as caught:
        render(template, "liquid", {})
    assert caught.value.construct == construct


def test_liquid_limits_come_from_render_limits():
    loops = "{% for i in (1..100) %}{% for j in (1..100) %}{% endfor %}{% endfor %}"
    assert text(loops, "liquid") == ""
    with pytest.raises(UnsafeTemplate, match="loop iteration limit"):
        render(loops, "liquid", {}, limits=RenderLimits(max_iterations=1000))


# --- golang --------------------------------------------------------------------------------


def test_golang_fields_conditions_ranges_and_variables():
    template = (
        "{{.Name}} {{ .A.B }} {{if .F}}f{{else if .Name}}n{{else}}e{{end}} "
        "{{range $i, $e := .Items}}{{$i}}={{$e}},{{end}} {{range .Empty}}x{{else}}none{{end}} "
        '{{with .A}}{{.B}}/{{$.Name}}{{end}}{{$x := .Name}}{{$x = "Bob"}} {{$x}}'
    )
    result = text(template, "golang", Name="Ann", A={"B": 2}, F=False, Items=["a", "b"], Empty=[])
    assert result == "Ann 2 n 0=a,1=b, none 2/Ann Bob"


def test_golang_trim_markers_comments_and_break():
    template = (
        "a  {{- .X -}}  b {{/* note */}}c {{- /* trimmed */ -}} d{{range .L}}{{.}}{{break}}{{end}}"
    )
    assert text(template, "golang", X="x", L=[1, 2]) == "axb cd1"


def test_golang_prints_values_as_go_fmt():
    template = "{{.F}} {{.G}} {{.L}} {{.M}} {{.N}} {{.T}}"
    result = text(
        template,
        "golang",
        F=1000000.0,
        G=2.5,
        L=["a", 1, None],
        M={"z": 1, "a": True},
        N=None,
        T=True,
    )
    assert result == "1e+06 2.5 [a 1 <nil>] map[a:true z:1] <no value> true"


def test_golang_missing_fields_keep_the_action_and_range_over_maps_is_sorted():
    rendered = render(
        "{{ .Name }} {{range $k, $v := .M}}{{$k}}{{end}}", "golang", {"M": {"b": 1, "a": 2}}
    )
    assert rendered == Rendered("{{ .Name }} ab", ("Name",))


@pytest.mark.parametrize(
    "template",
    ['{{printf "%s" .X}}', "{{ .X | json }}", '{{if eq .X "a"}}y{{end}}', '{{template "t" .}}'],
)
def test_golang_functions_and_pipes_are_unrenderable_named_as_written(template):
    with pytest.raises(UnrenderableTemplate) as caught:
        render(template, "golang", {"X": "a"})
    assert caught.value.construct == template.split("}}")[0] + "}}"


def test_golang_syntax_errors_name_the_action_and_line():
    with pytest.raises(TemplateError) as caught:
        render("x\n{{if .A}}never ended", "golang", {})
    assert (caught.value.construct, caught.value.line) == ("{{if .A}}", 2)


# --- fstring -------------------------------------------------------------------------------


def test_fstring_fields_escapes_specs_and_conversions():
    template = "{{literal}} {name} {n:>5} {x:.2f} {name!r} {items}"
    assert text(template, "fstring", name="Ann", n=7, x=3.14159, items=[1]) == (
        "{literal} Ann     7 3.14 'Ann' [1]"
    )


def test_fstring_missing_fields_keep_the_placeholder_as_written():
    rendered = render("Q: {question} ({n:>3})", "fstring", {})
    assert rendered == Rendered("Q: {question} ({n:>3})", ("question", "n"))


def test_fstring_errors():
    with pytest.raises(TemplateError) as caught:
        render("ok\nbad } here", "fstring", {})
    assert caught.value.line == 2
    with pytest.raises(TemplateError, match="positional"):
        render("{}", "fstring", {})


# --- real files ----------------------------------------------------------------------------

SK_EXPECTED = {
    "dotnet__samples__Concepts__Resources__GenerateStory.yaml": ("topic", "length"),
    "dotnet__samples__Concepts__Resources__HandlebarsPrompt.yaml": (
        "customer.firstName",
        "customer.lastName",
        "customer.age",
        "customer.membership",
    ),
    "dotnet__samples__Concepts__Resources__Plugins__MoviePlugins__MoviePluginYaml__TopMovies.yaml": (),
    "dotnet__samples__GettingStarted__Resources__GenerateStoryHandlebars.yaml": ("topic", "length"),
    "python__samples__concepts__filtering__resources__chat__chat.yaml": ("chat_history",),
    "python__samples__concepts__resources__function_choice_yaml__defined_function.yaml": (
        "chat_history",
        "user_input",
    ),
    "python__samples__concepts__resources__sample_plugins__parrot.yaml": ("user_message", "count"),
    "python__tests__assets__test_plugins__TestFunctionYamlJinja2__test_function.yaml": UnrenderableTemplate(
        "", "message(item)"
    ),
}


def _sk_templates(data: Path) -> dict[str, tuple[str, str]]:
    templates = {}
    for path in sorted((data / "formats/semantic_kernel").glob("*.yaml")):
        config = load_yaml(path.read_text(encoding="utf-8-sig"))
        if "template" in config:
            engine = engine_name(config.get("template_format", "semantic-kernel"))
            templates[path.name] = (config["template"], engine)
    return templates


def test_every_real_sk_template_renders_or_names_its_construct(data: Path):
    templates = _sk_templates(data)
    assert set(templates) == set(SK_EXPECTED)
    for name, (template, engine) in templates.items():
        expected = SK_EXPECTED[name]
        if isinstance(expected, TemplateError):
            with pytest.raises(type(expected)) as caught:
                render(template, engine, {})
            assert caught.value.construct == expected.construct, name
            continue
        rendered = render(template, engine, {})
        assert rendered.missing == expected, name
        for missing in expected:
            assert missing.split(".")[0] in template, name


def test_real_handlebars_prompt_renders_its_history_as_message_tags(data: Path):
    template, engine = _sk_templates(data)[
        "dotnet__samples__Concepts__Resources__HandlebarsPrompt.yaml"
    ]
    customer = {"firstName": "Ann", "lastName": "Lee", "age": 30, "membership": "Gold"}
    rendered = render(template, engine, {"customer": customer, "history": HISTORY})
    assert rendered.missing == ()
    assert (
        "First Name: Ann\n    Last Name: Lee\n    Age: 30\n    Membership Status: Gold"
        in rendered.text
    )
    assert rendered.text.endswith(
        '</message>\n<message role="user">\n    hi\n</message>\n'
        '<message role="assistant">\n    hello\n</message>\n'
    )


def test_real_skprompt_txt_renders(data: Path):
    path = data / "formats/semantic_kernel/prompt_template_samples__ChatPlugin__Chat__skprompt.txt"
    values = {"user": "Human: ", "bot": "AI: ", "input": "What is SK?"}
    rendered = render(path.read_text(encoding="utf-8"), "semantic-kernel", values)
    assert rendered.missing == ("history",)
    assert rendered.text.endswith("{{$history}}\nHuman: What is SK?\nAI: ")
    assert "Human: I have a question. Can you help? \nAI: Of course." in rendered.text
