"""Templates found in data never run code: sandbox escapes are refused before anything
runs, loops, time and output are bounded, and calls of helpers are reported, not made."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from pipeline.templates import (
    RenderLimits,
    UnrenderableTemplate,
    UnsafeTemplate,
    render,
)


@pytest.fixture
def nothing_runs(monkeypatch):
    """Fail the test if anything tries to start a process."""
    calls: list[str] = []

    def refuse(name: str):
        def refused(*args, **kwargs):
            calls.append(name)
            raise AssertionError(f"{name} was called from a template")

        return refused

    for module, name in ((os, "system"), (os, "popen"), (os, "execv"), (os, "spawnv")):
        monkeypatch.setattr(module, name, refuse(f"os.{name}"))
    monkeypatch.setattr(subprocess, "Popen", refuse("subprocess.Popen"))
    yield calls
    assert calls == []


ESCAPES = [
    "{{ ''.__class__.__mro__ }}",
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ cycler.__init__.__globals__.os.system('touch /tmp/pwned') }}",
    "{{ joiner.__init__.__globals__['os'].popen('id').read() }}",
    "{{ self._TemplateReference__context.cycler.__init__.__globals__.os.system('id') }}",
    "{{ ''['__class__']['__base__'] }}",
    "{% if false %}{{ namespace.__init__.__globals__ }}{% endif %}",
]


@pytest.mark.parametrize("engine", ["jinja2", "hf"])
@pytest.mark.parametrize("template", ESCAPES)
def test_known_jinja_escapes_are_refused_and_nothing_runs(template, engine, nothing_runs):
    with pytest.raises(UnsafeTemplate) as caught:
        render(template, engine, {"name": "x"})
    assert caught.value.construct.startswith("_")
    assert "interpreter internals" in str(caught.value)


@pytest.mark.parametrize(
    "template",
    [
        "{{ '{0.__class__.__mro__}'.format(name) }}",
        "{{ name.format_map }}{{ ('{0.' ~ '_' ~ '_class__}').format(name) }}",
        "{% set a = '_' ~ '_class__' %}{{ name[a] }}",
        "{{ name|attr('__class__') }}",
    ],
)
def test_escapes_built_at_run_time_are_refused_by_the_sandbox(template, nothing_runs):
    with pytest.raises(UnsafeTemplate, match="__class__"):
        render(template, "jinja2", {"name": "x"})


def test_mutating_data_is_refused():
    with pytest.raises(UnsafeTemplate):
        render("{{ items.append(1) }}", "jinja2", {"items": []})


def test_a_huge_loop_is_refused_by_the_iteration_bound_quickly():
    start = time.process_time()  # CPU time: a busy machine's waits do not count
    template = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
    with pytest.raises(UnsafeTemplate, match="100000 iterations"):
        render(template, "jinja2", {})
    with pytest.raises(UnsafeTemplate, match="range"):
        render("{% for i in range(10**12) %}{% endfor %}", "jinja2", {})
    assert time.process_time() - start < 2


def test_an_endless_render_is_refused_by_the_time_bound():
    limits = RenderLimits(max_seconds=0.2, max_iterations=10**12)
    template = "{% for i in range(10**6) %}{% for j in range(10**6) %}{% endfor %}{% endfor %}"
    start = time.process_time()
    with pytest.raises(UnsafeTemplate, match=r"longer than the 0\.2 s"):
        render(template, "jinja2", {}, limits=limits)
    assert time.process_time() - start < 1.5


LONG_RENDERS = {
    "jinja2 parse of a large template": ("jinja2", "ab {{ a }}\n" * 30_000),
    "liquid loops that print nothing": ("liquid", "{% for i in (1..99999) %}{% endfor %}" * 40),
    "liquid loops into a capture": (
        "liquid",
        "{% capture x %}{% for i in (1..99999) %}a{% endfor %}{% endcapture %}" * 40,
    ),
    "liquid parse of a large template": ("liquid", "ab {{ a }}\n" * 100_000),
    "handlebars parse of a large template": ("handlebars", "ab {{a}}\n" * 300_000),
    "golang parse of a large template": ("golang", "ab {{.a}}\n" * 300_000),
    "semantic-kernel parse of a large template": ("semantic-kernel", "ab {{$a}}\n" * 300_000),
}
"""Templates each engine spent seconds on without looking at the clock (parsing, loops
that write nothing to the output): refused only after 5-30 times a 0.2 s limit."""


@pytest.mark.parametrize(("engine", "template"), LONG_RENDERS.values(), ids=LONG_RENDERS.keys())
def test_a_long_render_is_refused_close_to_its_time_limit(engine, template):
    limits = RenderLimits(max_seconds=0.2, max_iterations=10**12, max_output_chars=10**8)
    start = time.process_time()  # CPU time: a busy machine's waits do not count
    with pytest.raises(UnsafeTemplate, match=r"longer than the 0\.2 s"):
        render(template, engine, {"a": "x"}, limits=limits)
    assert time.process_time() - start < 1.0


def test_a_go_range_over_a_number_counts_without_building_a_list():
    """`{{range n}}` built all n pairs before its first iteration (0.7 s for 5 million,
    all memory for a trillion); now it makes each as it is visited: a trillion that breaks
    at once takes no time (CPU time, which a busy machine does not inflate)."""
    start = time.process_time()
    assert render("{{range 1000000000000}}{{break}}{{end}}ok", "golang", {}).text == "ok"
    assert time.process_time() - start < 1.0


def test_recursion_is_refused():
    with pytest.raises(UnsafeTemplate, match="recurses too deeply"):
        render("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", "jinja2", {})


@pytest.mark.parametrize(
    "template",
    [
        "{% for i in range(100000) %}{{ 'x' * 100 }}{% endfor %}",
        "{{ 'x' * 10**9 }}",
        "{{ 'x'|center(10**9) }}",
        "{{ '%999999999s'|format('x') }}",
        "{{ '{:>999999999}'.format('x') }}",
        "{{ (' ' * 100000).join(range(1000)|map('string')) }}",
        "{{ ('x' * 1000)|replace('x', 'x' * 10000) }}",
        "{{ ('x\n' * 10000)|indent(10000) }}",
        "{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}"
        "{% endfor %}",
        "{% set ns = namespace(s=[1]) %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}"
        "{% endfor %}",
    ],
)
def test_huge_output_is_refused_by_the_size_bound_before_it_is_made(template):
    start = time.process_time()
    with pytest.raises(UnsafeTemplate, match="more than the 1000000 an output may hold"):
        render(template, "jinja2", {})
    assert time.process_time() - start < 2


def test_huge_powers_are_refused():
    with pytest.raises(UnsafeTemplate, match="too large a number"):
        render("{{ 10 ** (10 ** 10) }}", "jinja2", {})


@pytest.mark.parametrize(
    ("template", "engine", "variables"),
    [
        ("{{#each items}}{{this}}{{/each}}", "handlebars", {"items": ["x" * 1000] * 2000}),
        ("{{range .Items}}{{.}}{{end}}", "golang", {"Items": ["x" * 1000] * 2000}),
        ("{% for i in items %}{{ i }}{% endfor %}", "liquid", {"items": ["x" * 1000] * 2000}),
        ("{{$a}}" * 2000, "semantic-kernel", {"a": "x" * 1000}),
        ("{a}" * 2000, "fstring", {"a": "x" * 1000}),
        ("{a:>999999999}", "fstring", {"a": "x"}),
    ],
)
def test_every_engine_bounds_its_output(template, engine, variables):
    with pytest.raises(UnsafeTemplate, match="an output may hold"):
        render(template, engine, variables)


@pytest.mark.parametrize("engine", ["handlebars", "golang"])
def test_every_engine_bounds_its_loops(engine):
    template = {
        "handlebars": "{{#each a}}{{#each ../a}}{{/each}}{{/each}}",
        "golang": "{{range .a}}{{range $.a}}{{end}}{{end}}",
    }[engine]
    with pytest.raises(UnsafeTemplate, match="iterations"):
        render(template, engine, {"a": list(range(1000))})


@pytest.mark.parametrize(
    "template", ["{a.__class__}", "{a.__class__.__init__.__globals__}", "{a[0]}", "{a.real}"]
)
def test_fstring_attribute_and_index_access_is_refused(template, nothing_runs):
    with pytest.raises(UnsafeTemplate) as caught:
        render(template, "fstring", {"a": "text"})
    assert caught.value.construct == template


@pytest.mark.parametrize(
    ("template", "engine", "construct"),
    [
        ("{{json payload}}", "handlebars", "{{json payload}}"),
        ('{{#message role="user"}}hi{{/message}}', "handlebars", '{{#message role="user"}}'),
        ('{{set name="x" value=1}}', "handlebars", '{{set name="x" value=1}}'),
        ('{{printf "%s" .X}}', "golang", '{{printf "%s" .X}}'),
        ("{{ .X | json }}", "golang", "{{ .X | json }}"),
        ("{{time.now}}", "semantic-kernel", "{{time.now}}"),
        (
            '{{ http.get "https://example.com" }}',
            "semantic-kernel",
            '{{ http.get "https://example.com" }}',
        ),
        ("{{ message(item) }}", "jinja2", "message(item)"),
        ("{% include '/etc/passwd' %}", "jinja2", "{% include '/etc/passwd' %}"),
        ("{% include '/etc/passwd' %}", "liquid", "{% include '/etc/passwd' %}"),
    ],
)
def test_helper_and_plugin_calls_are_reported_not_run(template, engine, construct, nothing_runs):
    with pytest.raises(UnrenderableTemplate) as caught:
        render(template, engine, {"X": 1, "payload": {}})
    assert caught.value.construct == construct


def test_liquid_resource_limits_refuse_growth():
    template = (
        "{% assign s = 'xx' %}{% for i in (1..64) %}{% assign s = s | append: s %}{% endfor %}"
    )
    with pytest.raises(UnsafeTemplate):
        render(template, "liquid", {})


def test_self_referencing_variables_are_refused():
    looped: list = []
    looped.append(looped)
    with pytest.raises(UnsafeTemplate, match="nest too deeply"):
        render("{{ x }}", "jinja2", {"x": looped})


def test_the_templates_of_one_record_share_one_time_limit():
    """A record that renders several templates (one per PPE message, SK's two passes)
    gets one time limit for all of them, not one each (12 renders of 1 s each took 13 s
    against a 2 s limit): a render under a spent shared deadline is refused at once."""
    from pipeline.templates import Deadline, UnsafeTemplate, render

    deadline = Deadline()
    assert (
        render("Hello {{ name }}", "jinja2", {"name": "Ada"}, deadline=deadline).text == "Hello Ada"
    )
    deadline.at -= deadline.seconds + 1  # the record's time is used up
    templates = {
        "jinja2": "text {{ name }} more",
        "handlebars": "text {{name}} more",
        "golang": "text {{.name}} more",
        "fstring": "text {name} more",
        "semantic-kernel": "text {{$name}} more",
        "liquid": "text {{ name }} more",
    }
    for engine, template in templates.items():
        with pytest.raises(UnsafeTemplate, match="longer than"):
            render(template, engine, {"name": "Ada"}, deadline=deadline)
