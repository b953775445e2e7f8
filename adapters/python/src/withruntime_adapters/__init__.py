"""Runtime's four sandbox tools (runtime_exec, runtime_read_file,
runtime_write_file, runtime_list_files, from :mod:`withruntime.tools`) in
the shapes of Python agent frameworks, one submodule per framework, each
needing only its own framework (its extra of this package):

- ``withruntime_adapters.openai_agents`` — OpenAI Agents SDK ``FunctionTool``
- ``withruntime_adapters.langchain`` — LangChain / LangGraph ``StructuredTool``
- ``withruntime_adapters.llama_index`` — LlamaIndex ``FunctionTool``
- ``withruntime_adapters.crewai`` — CrewAI ``BaseTool``
- ``withruntime_adapters.pydantic_ai`` — Pydantic AI ``Tool``
- ``withruntime_adapters.smolagents`` — smolagents ``Tool``
- ``withruntime_adapters.google_adk`` — Google ADK ``BaseTool``
- ``withruntime_adapters.claude_agent_sdk`` — Claude Agent SDK in-process MCP server

Importing this package imports no framework.
"""

from ._common import RuntimeTool, runtime_tools

__all__ = ["RuntimeTool", "runtime_tools"]
