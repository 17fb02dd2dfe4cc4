//! A udpros node's parameters: private parameters from `_name:=value` arguments, typed
//! reads, and the cache that the master's paramUpdate calls keep fresh.

use std::time::Duration;
use udpros::master::Master;
use udpros::node::Node;
use udpros::xmlrpc::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn private_parameters_and_a_cache_kept_fresh_by_the_master() {
    let master = Master::start("127.0.0.1:0".parse().unwrap(), "127.0.0.1")
        .await
        .unwrap();
    let args = |extra: &[&str]| {
        let mut v = vec![
            format!("__master:={}", master.uri()),
            "__ip:=127.0.0.1".to_string(),
            "__ns:=/boat".to_string(),
        ];
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let sonar = Node::new(
        "sonar",
        args(&[
            "_range:=30",
            "_gains:=[1, 2.5]",
            "_frame:=sonar_link",
            "_auto:=yes",
        ]),
    )
    .await
    .unwrap();
    let other = Node::new("other", args(&[])).await.unwrap();
    assert_eq!(sonar.name(), "/boat/sonar");
    assert_eq!(sonar.param::<i32>("~range", 0).await.unwrap(), 30);
    assert_eq!(
        sonar.param::<Vec<f64>>("~gains", vec![]).await.unwrap(),
        vec![1.0, 2.5]
    );
    assert_eq!(
        sonar
            .param::<String>("~frame", String::new())
            .await
            .unwrap(),
        "sonar_link"
    );
    assert!(sonar.param::<bool>("~auto", false).await.unwrap());
    assert_eq!(sonar.param::<f64>("~missing", 4.5).await.unwrap(), 4.5);
    assert!(
        sonar.param::<i32>("~frame", 0).await.is_err(),
        "a string is not an int"
    );
    assert_eq!(
        other.get_param("/boat/sonar/range").await.unwrap(),
        Some(Value::Int(30))
    );

    // The cache: unset at first, then updated by the master's paramUpdate.
    assert_eq!(
        sonar.get_param_cached("speed_of_sound").await.unwrap(),
        None
    );
    other
        .set_param("/boat/speed_of_sound", Value::Double(1480.0))
        .await
        .unwrap();
    let fresh = async {
        loop {
            if sonar.get_param_cached("speed_of_sound").await.unwrap()
                == Some(Value::Double(1480.0))
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(5), fresh)
        .await
        .expect("paramUpdate reached the cache");
    other.delete_param("/boat/speed_of_sound").await.unwrap();
    let gone = async {
        while sonar
            .get_param_cached("speed_of_sound")
            .await
            .unwrap()
            .is_some()
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(5), gone)
        .await
        .expect("deletion reached the cache");
    assert_eq!(
        sonar.search_param("range").await.unwrap(),
        Some("/boat/sonar/range".into())
    );
}
