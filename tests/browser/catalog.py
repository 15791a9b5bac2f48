"""The scripted model the browser tests run the local server with (one script per task name)."""

import json

SURFACE = "refund-form"
CATALOG_ID = "https://a2ui.org/specification/v0_9/catalogs/basic/catalog.json"


def refund_script():
    """Plan three steps slowly (so the page shows them completing), ask alice, show a surface
    once answered, and thank whoever clicks its button."""
    steps = [
        {"name": "Look up the order", "description": "Find order 48213"},
        {"name": "Check the parcel", "description": "Tracking state", "depends_on": ["Look up the order"]},
        {"name": "Decide", "description": "Apply the policy", "depends_on": ["Look up the order", "Check the parcel"]},
    ]
    done = lambda step, output: {  # noqa: E731
        "delay_ms": 900,
        "tool_calls": [{"name": "complete_step", "arguments": {"step": step, "output": output}}],
    }
    ui = [
        {"version": "v0.9.1", "createSurface": {"surfaceId": SURFACE, "catalogId": CATALOG_ID}},
        {"version": "v0.9.1", "updateComponents": {"surfaceId": SURFACE, "components": [
            {"id": "root", "component": "Column", "children": ["q", "ok"]},
            {"id": "q", "component": "Text", "text": "Send the refund now?"},
            {"id": "ok", "component": "Button", "child": "ok-label",
             "action": {"event": {"name": "confirm", "context": {}}}},
            {"id": "ok-label", "component": "Text", "text": "Send refund"},
        ]}},
    ]
    return {"turns": [
        {"delay_ms": 600, "tool_calls": [{"name": "create_plan", "arguments": {"steps": steps}}]},
        done("Look up the order", "Order 48213 found"),
        done("Check the parcel", "Lost in transit"),
        done("Decide", "Refund in full"),
        {"tool_calls": [{"name": "ask_participant", "arguments": {
            "participant_id": "alice", "question": "Full or partial refund?",
            "options": ["Full refund", "Partial refund"]}}]},
        {"tool_calls": [{"name": "emit_ui", "arguments": {"messages": ui}}]},
        {"text": "Please confirm the refund with the button."},
        {"text": "Refund sent: thank you for confirming."},
    ]}


def big_plan_script(n=200):
    """A plan of n steps in layers of ten: each after one step of the layer before (and every
    third after two)."""
    steps = []
    for i in range(n):
        deps = [f"Step {j}" for j in (i - 10, i - 11) if j >= 0 and (j == i - 10 or i % 3 == 0)]
        steps.append({"name": f"Step {i}", "description": f"step number {i}", "depends_on": deps})
    return {"turns": [
        {"tool_calls": [{"name": "create_plan", "arguments": {"steps": steps}}]},
        {"text": "planned"},
    ]}


def write_catalog(directory):
    """Writes the script and the catalog into `directory`; returns the catalog's path."""
    script = {"tasks": {
        "Refund 48213": refund_script(),
        "Big plan": big_plan_script(),
        "*": {"turns": [{"text": "noted"}]},
    }}
    script_path = f"{directory}/script.json"
    with open(script_path, "w") as f:
        json.dump(script, f)
    catalog = {"default_model": "scripted", "models": [
        {"id": "scripted", "provider": "scripted", "settings": {"script": script_path}},
        {"id": "echo", "provider": "echo"},
    ]}
    path = f"{directory}/catalog.json"
    with open(path, "w") as f:
        json.dump(catalog, f)
    return path


if __name__ == "__main__":
    import sys

    print(write_catalog(sys.argv[1]))
