"""jobcontroller.testing"""
