"""jobcontroller.runtime"""
