"""End-to-end tests of the web console in headless Chromium (Selenium), against a running
local-server started with the scripted catalog of catalog.py.

    python console_test.py BASE_URL SCREENSHOT_DIR

Prints one line per check and `browser: N passed, N failed` last; exits non-zero on a failure.
"""

import json
import os
import sys
import time
import traceback
import urllib.request

from selenium import webdriver
from selenium.common.exceptions import (
    NoSuchElementException,
    StaleElementReferenceException,
    TimeoutException,
)
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

BASE = sys.argv[1].rstrip("/")
SHOTS = sys.argv[2]
WAIT = 30  # seconds: a deadline to poll within, never a timing asserted


def browser(width=1280, height=900):
    options = webdriver.ChromeOptions()
    options.binary_location = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                f"--window-size={width},{height}"):
        options.add_argument(arg)
    if width < 500:
        # A window cannot be this narrow: a phone's viewport is emulated instead.
        options.add_experimental_option("mobileEmulation", {
            "deviceMetrics": {"width": width, "height": height, "pixelRatio": 1}})
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(executable_path=os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver"))
    return webdriver.Chrome(options=options, service=service)


def wait_for(driver, what, condition, timeout=WAIT):
    try:
        # A live update may replace a node between finding and reading it: look again.
        return WebDriverWait(driver, timeout, poll_frequency=0.1,
                             ignored_exceptions=[StaleElementReferenceException]).until(
            lambda d: condition(d))
    except TimeoutException:
        raise AssertionError(f"timed out waiting for {what}") from None


def css(driver, selector):
    return driver.find_elements(By.CSS_SELECTOR, selector)


def text_of(driver, selector):
    found = css(driver, selector)
    return found[0].text if found else ""


def sign_in_as(driver, participant):
    driver.get(f"{BASE}/ui/")
    driver.execute_script("localStorage.setItem('th.participant', arguments[0])", participant)
    driver.get(f"{BASE}/ui/#/tasks")
    driver.refresh()  # the same page with another hash is not loaded again by get()
    wait_for(driver, "the task list", lambda d: css(d, "#task-list ul, #task-list .notice-empty"))


def console_errors(driver):
    return [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]


def shot(driver, name):
    os.makedirs(SHOTS, exist_ok=True)
    driver.save_screenshot(f"{SHOTS}/{name}.png")


def rpc(method, params, participant):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    request = urllib.request.Request(f"{BASE}/", data=body, headers={
        "Content-Type": "application/json", "A2A-Version": "1.0", "X-Participant-Id": participant})
    with urllib.request.urlopen(request, timeout=30) as response:
        answer = json.load(response)
    if "error" in answer:
        raise AssertionError(f"{method}: {answer['error']}")
    return answer["result"]


state = {}


def test_serves_the_console():
    with urllib.request.urlopen(f"{BASE}/ui/app.js") as r:
        assert r.headers["Content-Type"].startswith("text/javascript"), r.headers["Content-Type"]
    with urllib.request.urlopen(f"{BASE}/ui/config.json") as r:
        config = json.load(r)
    assert config["auth"] == "none" and "scripted" in config["models"], config


def test_sign_in_and_empty_list(driver):
    driver.get(f"{BASE}/ui")
    wait_for(driver, "the sign-in form", lambda d: css(d, "#participant-id"))
    assert driver.current_url.endswith("/ui/"), driver.current_url
    shot(driver, "sign-in")
    driver.find_element(By.ID, "participant-id").send_keys("alice")
    driver.find_element(By.CSS_SELECTOR, "#sign-in button[type=submit]").click()
    wait_for(driver, "the empty list", lambda d: css(d, "#task-list .notice-empty"))
    assert text_of(driver, "#me") == "alice"


def test_create_task_from_the_form(driver):
    driver.find_element(By.ID, "new-task").click()
    wait_for(driver, "the form", lambda d: css(d, "#new-task-form"))
    driver.find_element(By.ID, "f-name").send_keys("Refund 48213")
    driver.find_element(By.ID, "f-goal").send_keys("Refund order 48213")
    driver.find_element(By.ID, "f-description").send_keys("The parcel was lost in transit.")
    driver.find_element(By.ID, "f-criteria").send_keys("refund sent\ncustomer told")
    driver.find_element(By.ID, "add-participant").click()
    rows = css(driver, ".participant-row")
    rows[-1].find_element(By.CSS_SELECTOR, ".p-id").send_keys("bob")
    Select(rows[-1].find_element(By.CSS_SELECTOR, ".p-role")).select_by_value("watcher")
    shot(driver, "new-task")
    driver.find_element(By.ID, "create-task").click()
    wait_for(driver, "the task page", lambda d: "#/task/" in d.current_url and css(d, ".task-head h1"))
    state["task"] = driver.current_url.split("#/task/")[1]
    assert text_of(driver, ".task-head h1") == "Refund 48213"
    people = text_of(driver, "#participants")
    assert "alice" in people and "bob" in people, people


def test_plan_appears_and_steps_complete_live(driver):
    # No reload from here on: what changes arrives over SubscribeToTask.
    wait_for(driver, "the plan", lambda d: len(css(d, "svg.plan g.step")) == 3)
    shot(driver, "task-plan-working")
    wait_for(driver, "every step done",
             lambda d: len(css(d, 'svg.plan g.step[data-state="done"]')) == 3)
    click_when_stable(driver, "the first step", "svg.plan g.step")
    wait_for(driver, "the step's output", lambda d: "Order 48213 found" in text_of(d, ".step-detail"))


def test_answer_a_help_request_by_clicking_an_option(driver):
    wait_for(driver, "the help request", lambda d: css(d, "#help button.option"))
    assert "Full or partial refund?" in text_of(driver, "#help")
    shot(driver, "task-help-request")
    # The whole page as docs/console-task.png shows it (README).
    driver.set_window_size(1280, 1900)
    shot(driver, "console-task")
    driver.set_window_size(1280, 900)
    options = [b.text for b in css(driver, "#help button.option")]
    assert options == ["Full refund", "Partial refund"], options
    css(driver, "#help button.option")[0].click()
    wait_for(driver, "the answer in the conversation",
             lambda d: "Full refund" in text_of(d, "#conversation"))


def test_click_an_a2ui_button_and_see_the_reply(driver):
    surface = '#surfaces [data-surface="refund-form"]'
    wait_for(driver, "the A2UI surface", lambda d: "Send the refund now?" in text_of(d, surface))
    wait_for(driver, "the agent's prompt",
             lambda d: "Please confirm the refund" in text_of(d, "#conversation"))
    shot(driver, "task-a2ui")
    # The button lives in the renderer's shadow DOM.
    button = wait_for(driver, "the surface's button", lambda d: d.execute_script("""
        const find = (root) => {
          for (const el of root.querySelectorAll('*')) {
            if (el.tagName === 'BUTTON' && el.textContent.includes('Send refund')) return el;
            if (el.shadowRoot) { const f = find(el.shadowRoot); if (f) return f; }
          }
          return null;
        };
        return find(document.querySelector(arguments[0]));""", surface))
    button.click()
    wait_for(driver, "the agent's reply to the click",
             lambda d: "Refund sent: thank you for confirming." in text_of(d, "#conversation"))


def act_when_stable(driver, what, act):
    """Does `act`, again if the page redrew its element meanwhile (live updates replace nodes)."""
    def attempt(d):
        try:
            act(d)
            return True
        except (StaleElementReferenceException, NoSuchElementException):
            return False
    wait_for(driver, what, attempt)


def click_when_stable(driver, what, selector):
    act_when_stable(driver, what, lambda d: d.find_element(By.CSS_SELECTOR, selector).click())


def test_pick_a_model(driver):
    act_when_stable(driver, "the model picker", lambda d: Select(
        d.find_element(By.ID, "model-picker")).select_by_value("echo"))
    ext_key = "io.github.madarauchiha-314.tiny-harness/task"
    wait_for(driver, "/model echo applied", lambda d: rpc("GetTask", {"id": state["task"]}, "alice")
             ["metadata"][ext_key].get("model") == "echo")
    wait_for(driver, "the picker showing it", lambda d: d.execute_script(
        "return document.querySelector('#model-picker').value") == "echo")


def test_mark_a_criterion_met(driver):
    click_when_stable(driver, "the first criterion", "#criterion-0")
    wait_for(driver, "the criterion marked met", lambda d: "marked" if d.execute_script(
        "return document.querySelector('#criterion-0').checked") else False)
    ext_key = "io.github.madarauchiha-314.tiny-harness/task"
    wait_for(driver, "the edit stored", lambda d: rpc("GetTask", {"id": state["task"]}, "alice")
             ["metadata"][ext_key]["acceptance_criteria"][0]["met"])
    driver.refresh()
    wait_for(driver, "the criterion saved", lambda d: css(d, "#criterion-0")
             and d.find_element(By.ID, "criterion-0").is_selected())
    shot(driver, "task-page")


# The first SubscribeToTask of each page load answered by a stand-in stream: the task (read
# with the real GetTask), streamed-text chunks as issue 24 sends them, then, once the test
# releases it, the final status message. The service's own streamed output is not needed.
FAKE_STREAM = r"""
(() => {
  const real = window.fetch.bind(window);
  let faked = false;
  window.fetch = async (url, init) => {
    const body = init && typeof init.body === 'string' ? init.body : '';
    if (faked || !body.includes('"SubscribeToTask"')) return real(url, init);
    faked = true;
    const id = JSON.parse(body).params.id;
    const read = await real(url, {...init, body: JSON.stringify(
      {jsonrpc: '2.0', id: 0, method: 'GetTask', params: {id}})});
    const task = (await read.json()).result;
    const frame = (result) => `data: ${JSON.stringify({jsonrpc: '2.0', id: 1, result})}\n\n`;
    const chunk = (text, append, lastChunk) => frame({artifactUpdate: {taskId: id,
      contextId: task.contextId, append, lastChunk,
      artifact: {artifactId: 'stream:m-typed', name: 'streamed-text', parts: [{text}]}}});
    const final = frame({statusUpdate: {taskId: id, contextId: task.contextId, status: {
      state: 'TASK_STATE_INPUT_REQUIRED', message: {messageId: 'm-typed', role: 'ROLE_AGENT',
      parts: [{text: 'Order 48213 is refunded in full.'}]}}}});
    const encoder = new TextEncoder();
    const stream = new ReadableStream({async start(c) {
      c.enqueue(encoder.encode(frame({task}) + chunk('Order 48213 ', false, false)));
      c.enqueue(encoder.encode(chunk('is refunded', true, false)));
      while (!window.__releaseFinal) await new Promise((r) => setTimeout(r, 50));
      c.enqueue(encoder.encode(chunk(' in full.', true, true) + final));
      c.close();
    }});
    return new Response(stream, {headers: {'Content-Type': 'text/event-stream'}});
  };
})();
"""


def test_streamed_text_is_typed_then_replaced(driver):
    script = driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": FAKE_STREAM})
    try:
        driver.get(f"{BASE}/ui/#/task/{state['task']}")
        driver.refresh()
        wait_for(driver, "the reply being typed",
                 lambda d: text_of(d, "#typing .bubble.typing") == "Order 48213 is refunded")
        shot(driver, "task-streamed-text")
        driver.execute_script("window.__releaseFinal = true")
        wait_for(driver, "the typed text replaced by the final message",
                 lambda d: not css(d, "#typing .bubble"))
    finally:
        driver.execute_cdp_cmd("Page.removeScriptToEvaluateOnNewDocument",
                               {"identifier": script["identifier"]})


def test_a_stranger_sees_no_trace_of_the_task(driver):
    sign_in_as(driver, "mallory")
    assert "Refund 48213" not in text_of(driver, "#task-list")
    driver.get(f"{BASE}/ui/#/task/{state['task']}")
    wait_for(driver, "the not-found page", lambda d: "Task not found" in text_of(d, "main"))
    page = text_of(driver, "main")
    assert "48213" not in page and "alice" not in page, page


def test_render_a_200_step_plan(driver):
    created = rpc("SendMessage", {"message": {
        "messageId": "big-1", "role": "ROLE_USER",
        "parts": [{"text": "plan it"}, {"mediaType": "application/vnd.tiny-harness.task+json",
                                        "data": {"name": "Big plan", "goal": "a long plan"}}]}},
        "carol")
    task = created["task"]["id"]
    sign_in_as(driver, "carol")
    # Timed in the page: from the route change to 200 steps drawn (GetTask included).
    elapsed = driver.execute_async_script("""
        const done = arguments[arguments.length - 1];
        const t0 = performance.now();
        const check = () => {
          if (document.querySelectorAll('svg.plan g.step').length === 200) {
            done(performance.now() - t0);
          } else {
            requestAnimationFrame(check);
          }
        };
        location.hash = '#/task/' + arguments[0];
        check();""", task)
    print(f"figure: a task with a 200-step plan rendered in {elapsed:.0f} ms (headless Chromium)")
    shot(driver, "task-200-steps")


def test_narrow_screen(driver):
    sign_in_as(driver, "alice")
    driver.get(f"{BASE}/ui/#/task/{state['task']}")
    wait_for(driver, "the task page", lambda d: css(d, "svg.plan g.step"))
    width = driver.execute_script("return document.documentElement.scrollWidth")
    assert width <= 360, f"the page is {width} px wide at 360 px"
    shot(driver, "task-page-360px")


def main():
    passed = failed = 0
    wide = browser()
    narrow = None
    tests = [
        (test_serves_the_console, None),
        (test_sign_in_and_empty_list, wide),
        (test_create_task_from_the_form, wide),
        (test_plan_appears_and_steps_complete_live, wide),
        (test_answer_a_help_request_by_clicking_an_option, wide),
        (test_click_an_a2ui_button_and_see_the_reply, wide),
        (test_pick_a_model, wide),
        (test_mark_a_criterion_met, wide),
        (test_streamed_text_is_typed_then_replaced, wide),
        (test_a_stranger_sees_no_trace_of_the_task, wide),
        (test_render_a_200_step_plan, wide),
    ]
    try:
        for test, driver in tests:
            try:
                test(driver) if driver else test()
                errors = console_errors(driver) if driver else []
                assert not errors, f"console errors: {errors}"
                print(f"ok   {test.__name__}")
                passed += 1
            except Exception:
                print(f"FAIL {test.__name__}")
                traceback.print_exc(file=sys.stdout)
                if driver:
                    shot(driver, f"failed-{test.__name__}")
                failed += 1
        narrow = browser(360, 800)
        try:
            test_narrow_screen(narrow)
            errors = console_errors(narrow)
            assert not errors, f"console errors: {errors}"
            print("ok   test_narrow_screen")
            passed += 1
        except Exception:
            print("FAIL test_narrow_screen")
            traceback.print_exc(file=sys.stdout)
            failed += 1
    finally:
        wide.quit()
        if narrow:
            narrow.quit()
    print(f"browser: {passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
