#!/usr/bin/env python3
"""A rospy actionlib peer for udpros's interop tests, on actionlib's Test action
(goal, result and feedback: one int32 each). Run with the python that has ROS.

  rospy_action_peer.py serve NS
      a SimpleActionServer that counts up to the goal, feedback each 20 ms, and ends
      SUCCEEDED with result = goal; PREEMPTED (result = reached) when preempted; ABORTED
      (result = goal) for goals below zero; for goal 999 it accepts, sends one feedback
      and dies without a word. Prints READY.
  rospy_action_peer.py drive NS
      drives a server through the scenario the udpros server is tested with, printing
      CONNECTED, FEEDBACK n, RESULT <STATE> <result> per goal, and DONE.
  rospy_action_peer.py long NS
      sends a goal of 100000, prints ACTIVE at its first feedback, then its RESULT line
      (RESULT ACTIVE none if none came within 30 s).
"""
import os
import sys
import threading
import time

_SAY = threading.Lock()


def say(line):
    """One whole line: feedback callbacks print from rospy's threads, beside the main one."""
    with _SAY:
        sys.stdout.write(line + '\n')
        sys.stdout.flush()

import actionlib
import rospy
from actionlib.msg import TestAction, TestFeedback, TestGoal, TestResult
from actionlib_msgs.msg import GoalStatus

NAMES = {v: k for k, v in vars(GoalStatus).items() if k.isupper() and isinstance(v, int)}


def serve(ns):
    server = None

    def execute(goal):
        if goal.goal < 0:
            server.set_aborted(TestResult(result=goal.goal), 'below zero')
            return
        if goal.goal == 999:
            server.publish_feedback(TestFeedback(feedback=1))
            time.sleep(0.3)
            say('DYING')
            os._exit(3)
        reached = 0
        while reached < goal.goal:
            if server.is_preempt_requested():
                server.set_preempted(TestResult(result=reached), 'preempted')
                return
            time.sleep(0.02)
            reached += 1
            server.publish_feedback(TestFeedback(feedback=reached))
        server.set_succeeded(TestResult(result=reached), 'counted')

    server = actionlib.SimpleActionServer(ns, TestAction, execute_cb=execute, auto_start=False)
    server.start()
    say('READY')
    rospy.spin()


def result_line(client):
    result = client.get_result()
    value = result.result if result is not None else 'none'
    say('RESULT %s %s' % (NAMES.get(client.get_state(), '?'), value))


def drive(ns):
    a = actionlib.SimpleActionClient(ns, TestAction)
    b = actionlib.SimpleActionClient(ns, TestAction)
    if not (a.wait_for_server(rospy.Duration(20)) and b.wait_for_server(rospy.Duration(20))):
        say('NO SERVER')
        return
    say('CONNECTED')
    fed = threading.Event()

    def feedback(f):
        say('FEEDBACK %d' % f.feedback)
        fed.set()

    a.send_goal(TestGoal(goal=3), feedback_cb=feedback)
    a.wait_for_result(rospy.Duration(20))
    result_line(a)
    a.send_goal(TestGoal(goal=-1))
    a.wait_for_result(rospy.Duration(20))
    result_line(a)
    fed.clear()
    a.send_goal(TestGoal(goal=10000), feedback_cb=lambda f: fed.set())
    fed.wait(20)
    a.cancel_goal()
    a.wait_for_result(rospy.Duration(20))
    result_line(a)
    fed.clear()
    a.send_goal(TestGoal(goal=10000), feedback_cb=lambda f: fed.set())
    fed.wait(20)
    b.send_goal(TestGoal(goal=2))
    a.wait_for_result(rospy.Duration(20))
    result_line(a)
    b.wait_for_result(rospy.Duration(20))
    result_line(b)
    say('DONE')


def long_goal(ns):
    client = actionlib.SimpleActionClient(ns, TestAction)
    if not client.wait_for_server(rospy.Duration(20)):
        say('NO SERVER')
        return
    fed = threading.Event()
    client.send_goal(TestGoal(goal=100000), feedback_cb=lambda f: fed.set())
    fed.wait(20)
    say('ACTIVE')
    client.wait_for_result(rospy.Duration(30))
    result_line(client)


def main():
    args = rospy.myargv()[1:]
    rospy.init_node('rospy_action_peer', anonymous=True)
    if args[0] == 'serve':
        serve(args[1])
    elif args[0] == 'long':
        long_goal(args[1])
    else:
        drive(args[1])


if __name__ == '__main__':
    sys.exit(main())
