"""JSON Schema -> TypeScript: the rendering tool declarations show the model."""

from __future__ import annotations

from pipeline.formats.typescript import schema_to_typescript, type_name

WEATHER = {
    "type": "object",
    "properties": {
        "location": {"type": "string", "description": "City and country, e.g. Paris, France"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"},
        "days": {"type": "array", "items": {"type": "integer"}},
        "filters": {
            "type": "object",
            "properties": {"min temp": {"type": ["number", "null"]}},
            "required": ["min temp"],
        },
    },
    "required": ["location"],
}


def test_object_schema_renders_types_unions_optionals_comments_and_nesting():
    assert schema_to_typescript("get_weather", WEATHER, "Current weather.\nFree tier.") == (
        "// Current weather.\n"
        "// Free tier.\n"
        "type GetWeather = {\n"
        "  // City and country, e.g. Paris, France\n"
        "  location: string,\n"
        '  // default: "celsius"\n'
        '  unit?: "celsius" | "fahrenheit",\n'
        "  days?: number[],\n"
        "  filters?: {\n"
        '    "min temp": number | null,\n'
        "  },\n"
        "};"
    )


def test_arrays_of_unions_are_parenthesised_and_free_objects_are_records():
    schema = {
        "type": "object",
        "properties": {
            "ids": {"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "integer"}]}},
            "extra": {"type": "object", "additionalProperties": {"type": "string"}},
            "anything": {},
            "mode": {"const": "fast"},
        },
    }
    text = schema_to_typescript("t", schema)
    assert "ids?: (string | number)[]," in text
    assert "extra?: Record<string, string>," in text
    assert "anything?: unknown," in text
    assert 'mode?: "fast",' in text


def test_any_value_renders_without_error():
    for schema in (None, "string", [], {"type": "bogus"}, {"properties": "x"}, {"enum": []}):
        assert schema_to_typescript("x", schema).startswith("type X = ")


def test_deeply_nested_schema_stops_at_unknown():
    schema: dict = {"type": "string"}
    for _ in range(40):
        schema = {"type": "object", "properties": {"next": schema}}
    assert "unknown" in schema_to_typescript("deep", schema)


def test_type_names_are_identifiers():
    assert type_name("get_current-weather") == "GetCurrentWeather"
    assert type_name("2fa.verify") == "T2faVerify"
    assert type_name("!!!") == "Tool"
