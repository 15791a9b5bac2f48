"""Interop: the official A2A Python SDK client (a2a-sdk 1.3.0) against the local server.

    python tests/interop/python_sdk.py BASE_URL BINDING [--default-participant ID]

BINDING is JSONRPC or HTTP+JSON. The server must run with `--default-participant` set to
the id given here (default "interop-default"). Every check prints one PASS/FAIL line; the
closing line is "N passed, N failed" and the exit status is non-zero on any failure.

What the SDK 1.3.0 client does (read from its source, a2a/client/):
* Transport: `ClientFactory.create` walks the card's `supportedInterfaces` (server order, or
  the client's order with `use_client_preference=True`) and takes the first entry whose
  `protocolBinding` is in `ClientConfig.supported_protocol_bindings` (empty = JSONRPC only),
  preferring protocolVersion 1.0. Our card lists both bindings at one URL, so restricting
  the list to one binding picks it. Streaming is used for send when `ClientConfig.streaming`
  and the card's `capabilities.streaming` are both true; `subscribe` needs both.
* Identity: the SDK knows no participant. A message carries ours in `Message.metadata`
  (`participant_id`, a Struct field); for calls without a message (get, list, cancel,
  subscribe) the only carrier is an HTTP header: `ClientCallContext.service_parameters` is
  sent as request headers by both HTTP transports (`http_helpers.get_http_args`), so
  `X-Participant-Id` goes there. Without either, the server's `--default-participant` applies.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import traceback
import uuid

from collections.abc import Awaitable, Callable

import httpx

from a2a.client import A2ACardResolver, ClientCallContext, ClientConfig, create_client
from a2a.client.transports.jsonrpc import JsonRpcTransport
from a2a.client.transports.rest import RestTransport
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import (
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)

ALICE = 'interop-alice'
TRANSPORTS = {'JSONRPC': JsonRpcTransport, 'HTTP+JSON': RestTransport}
TIMEOUT = 20.0  # seconds for any one SDK call


class Checks:
    def __init__(self, label: str) -> None:
        self.label = label
        self.passed = 0
        self.failed = 0

    async def run(self, name: str, body: Callable[[], Awaitable[str | None]]) -> bool:
        t0 = time.perf_counter()
        try:
            detail = await asyncio.wait_for(body(), TIMEOUT)
        except Exception as e:  # noqa: BLE001 - every failure is reported, none stops the run
            self.failed += 1
            ms = (time.perf_counter() - t0) * 1000
            print(f'FAIL [{self.label}] {name} ({ms:.0f} ms): {type(e).__name__}: {e}')
            if not isinstance(e, AssertionError):
                traceback.print_exc(limit=3, file=sys.stdout)
            return False
        self.passed += 1
        ms = (time.perf_counter() - t0) * 1000
        print(f'PASS [{self.label}] {name} ({ms:.0f} ms)' + (f': {detail}' if detail else ''))
        return True


def state(s: int) -> str:
    return TaskState.Name(s)


def text_of(message: Message) -> str:
    return ''.join(p.text for p in message.parts if p.HasField('text'))


def user_message(text: str, task_id: str | None = None, participant: str | None = ALICE) -> Message:
    m = Message(role=Role.ROLE_USER, message_id=str(uuid.uuid4()), parts=[Part(text=text)])
    if participant:
        m.metadata.update({'participant_id': participant})
    if task_id:
        m.task_id = task_id
    return m


def as_alice() -> ClientCallContext:
    return ClientCallContext(service_parameters={'X-Participant-Id': ALICE})


async def expect_error(kind: type[Exception], call: Awaitable[object]) -> str:
    try:
        got = await call
    except Exception as e:  # noqa: BLE001
        assert type(e) is kind, f'expected {kind.__name__}, got {type(e).__name__}: {e!r}'
        return f'{type(e).__name__} ({e})'
    raise AssertionError(f'expected {kind.__name__}, got a result: {got!r:.200}')


async def collect(stream) -> list[StreamResponse]:  # noqa: ANN001
    return [ev async for ev in stream]


def kinds(events: list[StreamResponse]) -> list[str]:
    out = []
    for ev in events:
        kind = ev.WhichOneof('payload')
        if kind == 'task':
            out.append(f'task({state(ev.task.status.state)})')
        elif kind == 'status_update':
            out.append(f'status({state(ev.status_update.status.state)})')
        else:
            out.append(kind or '?')
    return out


def final_state(events: list[StreamResponse]) -> tuple[int, Message | None]:
    """State and status message after folding the events the way a client would."""
    st, msg = TaskState.TASK_STATE_UNSPECIFIED, None
    for ev in events:
        kind = ev.WhichOneof('payload')
        if kind == 'task':
            st = ev.task.status.state
            msg = ev.task.status.message if ev.task.status.HasField('message') else msg
        elif kind == 'status_update':
            st = ev.status_update.status.state
            if ev.status_update.status.HasField('message'):
                msg = ev.status_update.status.message
    return st, msg


async def main() -> int:  # noqa: PLR0915 - one linear script of checks
    ap = argparse.ArgumentParser()
    ap.add_argument('base')
    ap.add_argument('binding', choices=sorted(TRANSPORTS))
    ap.add_argument('--default-participant', default='interop-default')
    args = ap.parse_args()
    c = Checks(args.binding)
    ids: dict[str, str] = {}

    async with httpx.AsyncClient(timeout=TIMEOUT) as http:
        card = await A2ACardResolver(http, args.base).get_agent_card()

        def config(streaming: bool) -> ClientConfig:
            return ClientConfig(
                httpx_client=http, streaming=streaming, supported_protocol_bindings=[args.binding]
            )

        plain = await create_client(card, client_config=config(False))
        streaming = await create_client(card, client_config=config(True))

        async def transport_selected() -> str:
            want = TRANSPORTS[args.binding]
            for client in (plain, streaming):
                got = type(client._transport)  # noqa: SLF001 - the point of the check
                assert got is want, f'client picked {got.__name__}, wanted {want.__name__}'
            assert card.capabilities.streaming, 'the card must declare streaming'
            return f'{want.__name__} at {plain._transport.url}'  # noqa: SLF001

        async def send() -> str:
            events = await collect(plain.send_message(SendMessageRequest(message=user_message('hello plain'))))
            assert len(events) == 1 and events[0].HasField('task'), f'want one task, got {kinds(events)}'
            task = events[0].task
            assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED, state(task.status.state)
            assert text_of(task.status.message) == 'hello plain', f'echo: {text_of(task.status.message)!r}'
            ids['plain'] = task.id
            return f'{kinds(events)}, echo {text_of(task.status.message)!r}'

        async def send_streaming() -> str:
            events = await collect(
                streaming.send_message(SendMessageRequest(message=user_message('hello stream')))
            )
            assert events, 'empty stream'
            first = events[0]
            assert first.HasField('task'), f'a task stream must begin with the Task: {kinds(events)}'
            st, msg = final_state(events)
            assert st == TaskState.TASK_STATE_INPUT_REQUIRED, f'ended in {state(st)}: {kinds(events)}'
            assert msg is not None and text_of(msg) == 'hello stream', f'echo: {msg}'
            ids['stream'] = first.task.id
            return ' -> '.join(kinds(events))

        async def follow_up_streaming() -> str:
            task_id = ids['stream']
            events = await collect(
                streaming.send_message(SendMessageRequest(message=user_message('second turn', task_id)))
            )
            assert events, 'empty stream'
            for ev in events:
                kind = ev.WhichOneof('payload')
                got = getattr(ev, kind).id if kind == 'task' else getattr(ev, kind).task_id
                assert got == task_id, f'event for {got}, not {task_id}'
            st, msg = final_state(events)
            assert st == TaskState.TASK_STATE_INPUT_REQUIRED, f'ended in {state(st)}: {kinds(events)}'
            assert msg is not None and text_of(msg) == 'second turn', f'echo: {msg}'
            return ' -> '.join(kinds(events))

        async def get() -> str:
            task: Task = await plain.get_task(GetTaskRequest(id=ids['plain']), context=as_alice())
            assert task.id == ids['plain']
            assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED, state(task.status.state)
            texts = [(Role.Name(m.role), text_of(m)) for m in task.history]
            assert ('ROLE_USER', 'hello plain') in texts and ('ROLE_AGENT', 'hello plain') in texts, texts
            short: Task = await plain.get_task(
                GetTaskRequest(id=ids['stream'], history_length=1), context=as_alice()
            )
            assert len(short.history) == 1, f'historyLength=1 gave {len(short.history)} messages'
            return f'{state(task.status.state)}, history {len(task.history)}; historyLength=1 -> 1'

        async def get_as_other_participant() -> str:
            # No header and no message: the server's default participant, who is no
            # participant of alice's task: indistinguishable from not found.
            return await expect_error(TaskNotFoundError, plain.get_task(GetTaskRequest(id=ids['plain'])))

        async def list_tasks() -> str:
            res = await plain.list_tasks(ListTasksRequest(page_size=100), context=as_alice())
            got = {t.id for t in res.tasks}
            want = {ids['plain'], ids['stream']}
            assert want <= got, f'missing {want - got} in {len(got)} tasks'
            assert res.page_size == 100, res.page_size
            assert res.total_size >= 2, res.total_size
            filtered = await plain.list_tasks(
                ListTasksRequest(status=TaskState.TASK_STATE_CANCELED, page_size=100), context=as_alice()
            )
            assert not {t.id for t in filtered.tasks} & want, 'status filter ignored'
            other = await plain.list_tasks(ListTasksRequest(page_size=100))
            assert not {t.id for t in other.tasks} & want, 'default participant sees alice tasks'
            return f'{len(got)} tasks for {ALICE}, {len(other.tasks)} for the default participant'

        async def default_participant() -> str:
            # A plain A2A client asserting nobody: the operator's default participant.
            events = await collect(
                plain.send_message(SendMessageRequest(message=user_message('anonymous', participant=None)))
            )
            task = events[-1].task
            assert text_of(task.status.message) == 'anonymous'
            again = await plain.get_task(GetTaskRequest(id=task.id))
            assert again.id == task.id
            return f'task {task.id[:8]}… readable without a header'

        async def subscribe() -> str:
            # An interrupted (input-required) task: the stream opens with the Task snapshot
            # and stays open for the next turn (as a2a-sdk's own server does); the client
            # then walks away.
            sub = streaming.subscribe(SubscribeToTaskRequest(id=ids['plain']), context=as_alice())
            try:
                first = await anext(sub)
                assert first.HasField('task'), f'the first event must be the Task: {kinds([first])}'
                assert first.task.id == ids['plain']
                st = first.task.status.state
                assert st == TaskState.TASK_STATE_INPUT_REQUIRED, state(st)
                try:
                    more = await asyncio.wait_for(anext(sub), 0.3)
                    return f'{kinds([first])}, then {kinds([more])}'
                except TimeoutError:
                    return f'{kinds([first])}, stream open'
                except StopAsyncIteration:
                    return f'{kinds([first])}, stream closed'
            finally:
                await sub.aclose()

        async def subscribe_follows_a_turn() -> str:
            # Subscribe, and while subscribed, send the next turn (non-streaming): the
            # subscriber sees the task work through it and come back to input-required.
            task_id = ids['plain']
            sub = streaming.subscribe(SubscribeToTaskRequest(id=task_id), context=as_alice())
            first = await anext(sub)
            assert first.HasField('task'), kinds([first])
            reply = await collect(
                plain.send_message(SendMessageRequest(message=user_message('while subscribed', task_id)))
            )
            assert text_of(reply[-1].task.status.message) == 'while subscribed'
            rest = await collect(sub)
            events = [first, *rest]
            st, msg = final_state(events)
            # A server may close at the first interrupted state (then only the snapshot came).
            if len(events) > 1:
                assert msg is not None and text_of(msg) == 'while subscribed', kinds(events)
            return ' -> '.join(kinds(events))

        async def cancel() -> str:
            task = await plain.cancel_task(CancelTaskRequest(id=ids['stream']), context=as_alice())
            assert task.id == ids['stream']
            assert task.status.state == TaskState.TASK_STATE_CANCELED, state(task.status.state)
            again = await plain.get_task(GetTaskRequest(id=ids['stream']), context=as_alice())
            assert again.status.state == TaskState.TASK_STATE_CANCELED, state(again.status.state)
            return f'{state(task.status.state)}, GetTask agrees'

        async def cancel_again() -> str:
            return await expect_error(
                TaskNotCancelableError,
                plain.cancel_task(CancelTaskRequest(id=ids['stream']), context=as_alice()),
            )

        async def subscribe_terminal() -> str:
            return await expect_error(
                UnsupportedOperationError,
                collect(streaming.subscribe(SubscribeToTaskRequest(id=ids['stream']), context=as_alice())),
            )

        async def not_found() -> str:
            return await expect_error(
                TaskNotFoundError,
                plain.get_task(GetTaskRequest(id=f'no-such-task-{uuid.uuid4()}'), context=as_alice()),
            )

        async def not_found_streaming() -> str:
            return await expect_error(
                TaskNotFoundError,
                collect(streaming.subscribe(SubscribeToTaskRequest(id='no-such-task'), context=as_alice())),
            )

        steps: list[tuple[str, Callable[[], Awaitable[str | None]], tuple[str, ...]]] = [
            ('transport selected from the card', transport_selected, ()),
            ('send (SendMessage): echo, input-required', send, ()),
            ('send streaming (SendStreamingMessage)', send_streaming, ()),
            ('send streaming, second turn on the task', follow_up_streaming, ('stream',)),
            ('get (GetTask, X-Participant-Id header)', get, ('plain', 'stream')),
            ('get as another participant -> TaskNotFoundError', get_as_other_participant, ('plain',)),
            ('list (ListTasks, filters, per participant)', list_tasks, ('plain', 'stream')),
            ('no identity -> --default-participant', default_participant, ()),
            ('subscribe (SubscribeToTask) to an input-required task', subscribe, ('plain',)),
            ('subscribe, then a turn arrives', subscribe_follows_a_turn, ('plain',)),
            ('cancel (CancelTask)', cancel, ('stream',)),
            ('cancel a canceled task -> TaskNotCancelableError', cancel_again, ('stream',)),
            ('subscribe to a terminal task -> UnsupportedOperationError', subscribe_terminal, ('stream',)),
            ('get unknown id -> TaskNotFoundError', not_found, ()),
            ('subscribe unknown id -> TaskNotFoundError', not_found_streaming, ()),
        ]
        for name, body, needs in steps:
            missing = [n for n in needs if n not in ids]
            if missing:
                c.failed += 1
                print(f'FAIL [{c.label}] {name}: skipped, an earlier check made no {missing} task')
                continue
            await c.run(name, body)
        await plain.close()
        await streaming.close()

    print(f'{args.binding}: {c.passed} passed, {c.failed} failed')
    return 1 if c.failed else 0


if __name__ == '__main__':
    sys.exit(asyncio.run(main()))
