"""The a2a-sdk 1.3.0 echo server the load benchmark compares ours with (bench/run.sh).

Written from the SDK's public API (the minimal server of shared/reference/a2a-1.0.md 6.1):
`DefaultRequestHandler` (= DefaultRequestHandlerV2 in 1.3.0) over `InMemoryTaskStore`,
JSON-RPC at /a2a/jsonrpc and HTTP+JSON at /a2a/rest, one uvicorn worker, on 127.0.0.1.

    python bench/python_echo_server.py --port 41241 [--reply input-required|complete]

`--reply input-required` (default) does what our server's echo agent does with the first
message of a conversation: the task is created SUBMITTED (with the user message in its
history), goes WORKING, then INPUT_REQUIRED with the echo as the status message.
`--reply complete` is the reference's echo: an artifact with the text, then COMPLETED.
The first stdout line is "listening on http://127.0.0.1:PORT" once the socket is bound.
"""

from __future__ import annotations

import argparse
import asyncio
import logging

import uvicorn

from starlette.applications import Starlette

from a2a.server.agent_execution.agent_executor import AgentExecutor
from a2a.server.agent_execution.context import RequestContext
from a2a.server.events.event_queue import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks.inmemory_task_store import InMemoryTaskStore
from a2a.server.tasks.task_updater import TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Part,
    Task,
    TaskState,
    TaskStatus,
)


class EchoExecutor(AgentExecutor):
    def __init__(self, reply: str) -> None:
        self.reply = reply

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input()
        updater = TaskUpdater(event_queue, context.task_id or '', context.context_id or '')
        if context.current_task is None:
            # A task stream must begin with the Task (spec 3.1.2).
            await event_queue.enqueue_event(
                Task(
                    id=context.task_id,
                    context_id=context.context_id,
                    status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                    history=[context.message],
                )
            )
        if self.reply == 'complete':
            await updater.add_artifact(parts=[Part(text=text)], name='echo')
            await updater.complete()
            return
        await updater.start_work()
        await updater.requires_input(updater.new_agent_message([Part(text=text)]))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await TaskUpdater(event_queue, context.task_id or '', context.context_id or '').cancel()


def build_app(host: str, port: int, reply: str) -> Starlette:
    base = f'http://{host}:{port}'
    card = AgentCard(
        name='Echo Agent',
        description='Echoes the text it receives',
        version='1.0.0',
        supported_interfaces=[
            AgentInterface(protocol_binding='JSONRPC', protocol_version='1.0', url=f'{base}/a2a/jsonrpc'),
            AgentInterface(protocol_binding='HTTP+JSON', protocol_version='1.0', url=f'{base}/a2a/rest'),
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=['text/plain'],
        default_output_modes=['text/plain'],
        skills=[AgentSkill(id='echo', name='Echo', description='Echo text back', tags=['echo'])],
    )
    handler = DefaultRequestHandler(
        agent_executor=EchoExecutor(reply), task_store=InMemoryTaskStore(), agent_card=card
    )
    routes = (
        create_agent_card_routes(agent_card=card)
        + create_jsonrpc_routes(request_handler=handler, rpc_url='/a2a/jsonrpc')
        + create_rest_routes(request_handler=handler, path_prefix='/a2a/rest')
    )
    return Starlette(routes=routes)


class Server(uvicorn.Server):
    async def startup(self, sockets=None) -> None:  # noqa: ANN001
        await super().startup(sockets)
        if self.started:
            print(f'listening on http://{self.config.host}:{self.config.port}', flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument('--host', default='127.0.0.1')
    ap.add_argument('--port', type=int, default=41241)
    ap.add_argument('--reply', choices=['input-required', 'complete'], default='input-required')
    args = ap.parse_args()
    logging.getLogger('a2a').setLevel(logging.WARNING)
    app = build_app(args.host, args.port, args.reply)
    config = uvicorn.Config(app, host=args.host, port=args.port, log_level='warning', access_log=False)
    asyncio.run(Server(config).serve())


if __name__ == '__main__':
    main()
