"""MiniPTXAgent: the turn loop, its models, prompts, code extraction and feedback.

UI-agnostic: the headless CLI and the TUI both drive `MiniPTXAgent.run()` and answer its `Approver`.
"""
