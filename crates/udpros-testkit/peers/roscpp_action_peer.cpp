// A roscpp actionlib peer for udpros's interop tests, on actionlib's Test action; the same
// two modes and lines as rospy_action_peer.py:
//   roscpp_action_peer serve NS   (READY; counts to the goal; aborts below zero; dies on 999)
//   roscpp_action_peer drive NS   (CONNECTED, FEEDBACK n, RESULT <STATE> <result>, DONE)
//   roscpp_action_peer long NS    (a goal of 100000: ACTIVE at its first feedback, then its
//                                  RESULT line, within 30 s)
#include <actionlib/TestAction.h>
#include <actionlib/client/simple_action_client.h>
#include <actionlib/server/simple_action_server.h>
#include <ros/ros.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

using Server = actionlib::SimpleActionServer<actionlib::TestAction>;
using Client = actionlib::SimpleActionClient<actionlib::TestAction>;

static void serve(const std::string &ns) {
  ros::NodeHandle nh;
  Server *server = nullptr;
  Server s(nh, ns, [&server](const actionlib::TestGoalConstPtr &goal) {
    actionlib::TestResult result;
    actionlib::TestFeedback feedback;
    if (goal->goal < 0) {
      result.result = goal->goal;
      server->setAborted(result, "below zero");
      return;
    }
    if (goal->goal == 999) {
      feedback.feedback = 1;
      server->publishFeedback(feedback);
      ros::Duration(0.3).sleep();
      std::printf("DYING\n");
      std::fflush(stdout);
      std::_Exit(3);
    }
    int reached = 0;
    while (reached < goal->goal) {
      if (server->isPreemptRequested()) {
        result.result = reached;
        server->setPreempted(result, "preempted");
        return;
      }
      ros::Duration(0.02).sleep();
      feedback.feedback = ++reached;
      server->publishFeedback(feedback);
    }
    result.result = reached;
    server->setSucceeded(result, "counted");
  }, false);
  server = &s;
  s.start();
  std::printf("READY\n");
  std::fflush(stdout);
  ros::spin();
}

static void result_line(Client &c) {
  auto result = c.getResult();
  std::printf("RESULT %s %d\n", c.getState().toString().c_str(), result ? result->result : -12345);
  std::fflush(stdout);
}

static void drive(const std::string &ns) {
  ros::AsyncSpinner spinner(2);
  spinner.start();
  Client a(ns, false), b(ns, false);
  if (!a.waitForServer(ros::Duration(20)) || !b.waitForServer(ros::Duration(20))) {
    std::printf("NO SERVER\n");
    return;
  }
  std::printf("CONNECTED\n");
  std::fflush(stdout);
  std::atomic<int> fed{0};
  auto count = [&fed](const actionlib::TestFeedbackConstPtr &) { fed++; };
  actionlib::TestGoal goal;
  goal.goal = 3;
  a.sendGoal(goal, Client::SimpleDoneCallback(), Client::SimpleActiveCallback(),
             [](const actionlib::TestFeedbackConstPtr &f) {
               std::printf("FEEDBACK %d\n", f->feedback);
               std::fflush(stdout);
             });
  a.waitForResult(ros::Duration(20));
  result_line(a);
  goal.goal = -1;
  a.sendGoal(goal);
  a.waitForResult(ros::Duration(20));
  result_line(a);
  for (int round = 0; round < 2; round++) {
    fed = 0;
    goal.goal = 10000;
    a.sendGoal(goal, Client::SimpleDoneCallback(), Client::SimpleActiveCallback(), count);
    for (int i = 0; i < 2000 && fed == 0; i++) ros::Duration(0.01).sleep();
    if (round == 0) {
      a.cancelGoal();
    } else {
      goal.goal = 2;
      b.sendGoal(goal);
    }
    a.waitForResult(ros::Duration(20));
    result_line(a);
  }
  b.waitForResult(ros::Duration(20));
  result_line(b);
  std::printf("DONE\n");
  std::fflush(stdout);
}

static void long_goal(const std::string &ns) {
  ros::AsyncSpinner spinner(2);
  spinner.start();
  Client client(ns, false);
  if (!client.waitForServer(ros::Duration(20))) {
    std::printf("NO SERVER\n");
    return;
  }
  std::atomic<int> fed{0};
  actionlib::TestGoal goal;
  goal.goal = 100000;
  client.sendGoal(goal, Client::SimpleDoneCallback(), Client::SimpleActiveCallback(),
                  [&fed](const actionlib::TestFeedbackConstPtr &) { fed++; });
  for (int i = 0; i < 2000 && fed == 0; i++) ros::Duration(0.01).sleep();
  std::printf("ACTIVE\n");
  std::fflush(stdout);
  client.waitForResult(ros::Duration(30));
  result_line(client);
}

int main(int argc, char **argv) {
  ros::init(argc, argv, "roscpp_action_peer", ros::init_options::AnonymousName);
  if (argc < 3) return 2;
  std::string mode = argv[1], ns = argv[2];
  if (mode == "serve") serve(ns);
  else if (mode == "long") long_goal(ns);
  else drive(ns);
  ros::shutdown();
  return 0;
}
