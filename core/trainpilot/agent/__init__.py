"""The agent decides: candidate plans, a prediction per plan, the objective, the confidence, and
the seed's rule cascade as the cold start. It calls the cost model (predict/); the cost model never
calls it.

    orchestrator    observe -> think -> act, every step recorded as an AgentStep
    planning        profile a job and plan it without training (`headless plan`)
"""
