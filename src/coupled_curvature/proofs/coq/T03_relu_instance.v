(* Instance (b) of the end-to-end T3 law (T03_network_law.T3_network_W): a ReLU network at a point
   where no hidden pre-activation is 0, so that the loss is not a polynomial in the block but agrees
   with one NEAR the point.

   - near_eq_differentiable / near_eq_local: if f = g on a neighbourhood of x, then f is
     differentiable where g is, and the local hypotheses of T3 (L differentiable near x, its partials
     differentiable at x) pass from g to f, with the same gradient and Hessian at x (derive_near_eq);
   - relu_near_pos / relu_near_neg: the sign of a pre-activation p continuous at x with p x <> 0
     persists near x, so relu (p y) is p y (p x > 0) or 0 (p x < 0) near x (\near reasoning);
   - T3_relu_instance: the 1-2-1 ReLU net  x |-> (1 1) relu(W x)  with squared loss against the target
     1 at the input x = 1, block l = W (the first layer's weight) at W = (2, -2): one hidden
     pre-activation is 2 > 0, the other -2 < 0 (the ReLU is not the identity there, and the loss has a
     kink at W_1 = 0).  Near W the loss is the polynomial (W_0 - 1)² of the point's linear region
     (rloss_near), so every hypothesis holds (proved, not assumed), g = 2 e <> 0 (e the coordinate of
     W_0), H = 2 e eᵀ, and T3's conclusions (g' = c⁻¹g, H' = c⁻²H, D' = D, D⁺' = D⁺, ...) hold there for
     every c > 0 by T3_network_W;
   - T3_relu_next_instance: the same network and point, block l+1 = the output weight W2 at (1 1) (the hidden
     activations are the constants relu(2) = 2 and relu(-2) = 0 there): the loss is (2 v_0 - 1)²,
     every hypothesis holds, g = 4 e <> 0, and T3_network_next_out's law holds (factor c⁻¹). *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp Require Import boolp classical_sets functions reals topology normedtype derive landau signed.
From mathcomp Require Import ring.
From CoupledCurvature Require Import DefsAnalytic T01_analytic T02_homogeneous_rescaling T03_network_law.

Section Transfer.
Variable R : realType.

Lemma near_eq_differentiable (U W : normedModType R) (f g : U -> W) (x : U) :
  (\forall y \near x, f y = g y) -> differentiable g x -> differentiable f x.
Proof.
move=> fg dg; have fgx : f x = g x := nbhs_singleton fg.
apply/diffP.
set P := fun df : {linear U -> W} => continuous df /\ forall y,
  f y = f (lim x) + df (y - lim x) +o_(y \near x) (y - lim x).
suff : P ('d f x) by [].
apply: (@getPex _ P); exists ('d g x); split; first exact: diff_continuous.
suff H : (fun y => f y) = (fun y => f (lim x) + 'd g x (y - lim x)) +o_x (fun y => y - lim x).
  by move=> y; exact: (congr1 (fun h => h y) H).
case: dg => -[_ /eqaddoP Hg].
apply/eqaddoP => _/posnumP[eps].
have {}Hg := Hg _ (gt0 eps).
near=> y.
have fy : f y = g y by near: y.
have fgx' : f (lim x) = g (lim x) by rewrite lim_id.
rewrite /= !fctE fy fgx' lim_id.
near: y; apply: filterS (Hg _ _) => // z; rewrite /= !fctE lim_id.
Unshelve. all: by end_near.
Qed.

(* f = g near x gives f = g near every point near x *)
Lemma near_eq_near (U : normedModType R) (T : Type) (f g : U -> T) (x : U) :
  (\forall y \near x, f y = g y) -> \forall y \near x, \forall z \near y, f z = g z.
Proof. exact: nbhs_interior. Qed.

Variable n : nat.
Local Notation V := (matrix_normedModType R n 0).

Theorem near_eq_local (f g : V -> R^o) (x : V) :
  (\forall y \near x, f y = g y) ->
  differentiable_near g x -> (forall j, differentiable (fun y => (d1 g (e j) y : R^o)) x) ->
  [/\ differentiable_near f x, (forall j, differentiable (fun y => (d1 f (e j) y : R^o)) x),
      grad f x = grad g x & hess f x = hess g x].
Proof.
move=> fg dg dD.
have fgn := near_eq_near fg.
have Ed v : \forall y \near x, (d1 f v y : R^o) = d1 g v y.
  by apply: filterS fgn => y fgy; rewrite /d1 (derive_near_eq _ fgy).
split.
- rewrite /differentiable_near; apply: filterS2 fgn dg => y fgy dgy.
  exact: near_eq_differentiable fgy dgy.
- by move=> j; apply: near_eq_differentiable (dD j); exact: Ed.
- by apply/matrixP => i j; rewrite !mxE; exact: nbhs_singleton (Ed _).
- have E i j : d2 f (e i) (e j) x = d2 g (e i) (e j) x.
    exact: (derive_near_eq (e i) (Ed (e j))).
  by rewrite /hess; apply/eq_mx => i j; exact: E.
Qed.

End Transfer.

Section Sign.
Variable R : realType.

(* the sign of a pre-activation persists near a point where it is not 0: near x, relu (p y) is p y
   where p x > 0 and 0 where p x < 0 *)
Lemma relu_near_pos (U : normedModType R) (p : U -> R^o) (x : U) :
  p @ x --> p x -> 0 < p x -> \forall y \near x, relu (p y) = p y.
Proof.
move=> cp px; near=> y.
have py : 0 < p y by near: y; exact: (@cvgr_gt _ _ _ _ p (p x) cp 0 px).
by rewrite /relu Order.POrderTheory.max_l // Order.POrderTheory.ltW.
Unshelve. all: by end_near.
Qed.

Lemma relu_near_neg (U : normedModType R) (p : U -> R^o) (x : U) :
  p @ x --> p x -> p x < 0 -> \forall y \near x, relu (p y) = 0.
Proof.
move=> cp px; near=> y.
have py : p y < 0 by near: y; exact: (@cvgr_lt _ _ _ _ p (p x) cp 0 px).
by rewrite /relu Order.POrderTheory.max_r // Order.POrderTheory.ltW.
Unshelve. all: by end_near.
Qed.

End Sign.

Section ReluInstance.
Variable R : realType.
Local Notation V := (wvec R 1 0).

Definition rnet (v : V) : net R 1 1 :=
  plug (Hole R 1) (Layer (unvec v) 0 (Out (const_mx 1 : 'M[R]_(1, 2)) 0)).

Definition rloss (v : V) : R^o :=
  \sum_(s < 1) (eval (@relu _) (rnet v) (1%:M : 'cV[R]_1) 0 0 - 1) ^+ 2.

Lemma unvecE (v : V) i j : unvec v i j = v (mxvec_index i j) 0.
Proof. by rewrite /unvec !mxE. Qed.

Definition k0 : 'I_(0 + 1 * 1).+1 := mxvec_index (0 : 'I_2) (0 : 'I_1).
Definition k1 : 'I_(0 + 1 * 1).+1 := mxvec_index (1 : 'I_2) (0 : 'I_1).

Lemma rlossE (v : V) :
  rloss v = (relu (v k0 0) + relu (v k1 0) - 1) ^+ 2.
Proof.
rewrite /rloss big_ord1 /rnet /= mulmx1 !addr0 !mxE !big_ord_recl big_ord0.
have -> : lift ord0 ord0 = 1 :> 'I_2 by apply/val_inj.
by rewrite !mxE !mul1r addr0.
Qed.

(* the polynomial of the linear region of the point: unit 0 active, unit 1 inactive *)
Definition Q (v : V) : R^o := v k0 0 - 1.
Definition P (v : V) : R^o := Q v * Q v.

Lemma coord_cont (k : 'I_(0 + 1 * 1).+1) (x : V) : {for x, continuous (fun v : V => (v k 0 : R^o))}.
Proof. exact/differentiable_continuous/differentiable_coord. Qed.

Definition W0 : 'M[R]_(2, 1) := \col_i ((-1) ^+ i *+ 2).

Lemma rloss_near : \forall y \near vec W0, rloss y = P y.
Proof.
have w0 : vec W0 k0 0 = 2%:R by rewrite -unvecE vecK mxE expr0.
have w1 : vec W0 k1 0 = - 2%:R by rewrite -unvecE vecK mxE expr1 mulNrn.
have n0 : 0 < vec W0 k0 0 by rewrite w0 ltr0n.
have n1 : vec W0 k1 0 < 0 by rewrite w1 oppr_lt0 ltr0n.
have := relu_near_pos (@coord_cont k0 _) n0; have := relu_near_neg (@coord_cont k1 _) n1.
move=> H1 H0; near=> y.
rewrite rlossE (near H0 y) // (near H1 y) // addr0 /P /Q.
by rewrite expr2.
Unshelve. all: by end_near.
Qed.

Lemma diff_Q (x : V) : differentiable Q x.
Proof.
have -> : Q = (fun v : V => (v k0 0 : R^o)) - cst 1 by [].
by apply: differentiableB; [exact: differentiable_coord | exact: differentiable_cst].
Qed.

Lemma derive_Q (x : V) j : derive Q x (e j) = (k0 == j)%:R.
Proof.
rewrite /derive /=.
apply: (lim_near_cst (@norm_hausdorff _ [pseudoMetricNormedZmodType R of R^o])).
move: (near_neq0 R); apply: filterS => h h0.
rewrite /Q !mxE eqxx andbT regular_scaleE.
have E (a b c : R) : a + b - c - (b - c) = a by ring.
by rewrite E mulrA mulVf // mul1r.
Qed.

Lemma d1_P j : (fun y : V => (d1 P (e j) y : R^o)) = ((k0 == j)%:R *+ 2 : R) *: Q.
Proof.
apply/funext => y; rewrite /d1 /P deriveM ?derive_Q; try exact/diff_derivable/diff_Q.
rewrite !regular_scaleE.
change (Q y * (k0 == j)%:R + Q y * (k0 == j)%:R = (k0 == j)%:R *+ 2 * Q y).
by rewrite -mulr2n mulrnAl mulrC.
Qed.

Lemma P_near : differentiable_near P (vec W0).
Proof.
by rewrite /differentiable_near; near=> y; apply: differentiableM; exact: diff_Q.
Unshelve. all: by end_near.
Qed.

Lemma d1_P_diff j : differentiable (fun y : V => (d1 P (e j) y : R^o)) (vec W0).
Proof. by rewrite d1_P; apply: differentiableZ; exact: diff_Q. Qed.

Lemma vec_delta00 : vec (delta_mx 0 0 : 'M[R]_(2, 1)) = delta_mx k0 0.
Proof. by rewrite /vec mxvec_delta trmx_delta. Qed.

Lemma Q_w : Q (vec W0) = 1.
Proof.
rewrite /Q -unvecE vecK mxE expr0.
by rewrite -[2%:R]/((1 + 1)%:R : R) natrD addrK.
Qed.

Lemma grad_P : grad P (vec W0) = 2%:R *: vec (delta_mx 0 0).
Proof.
apply/matrixP => k b; rewrite !ord1 vec_delta00 !mxE.
have := congr1 (fun f => f (vec W0)) (d1_P k); rewrite /= => ->.
change ((k0 == k)%:R *+ 2 * Q (vec W0) = 2%:R * ((k == k0) && ((0 : 'I_1) == 0))%:R).
rewrite Q_w mulr1 (eq_sym k0) andbT.
by rewrite -mulr_natl.
Qed.

Lemma hess_P : hess P (vec W0) = 2%:R *: (vec (delta_mx 0 0) *m (vec (delta_mx 0 0))^T).
Proof.
apply/matrixP => a b; rewrite vec_delta00 trmx_delta mul_delta_mx !mxE /d2 d1_P.
change (derive (fun y => ((k0 == b)%:R *+ 2 * Q y : R^o)) (vec W0) (e a)
        = 2%:R * ((a == k0) && (b == k0))%:R).
have [Eb|kb] := eqVneq b k0; last first.
  rewrite mul0rn andbF mulr0.
  have -> : (fun y => (0 * Q y : R^o)) = cst 0 by apply/funext => y; rewrite mul0r.
  exact: derive_val.
rewrite andbT derive_scale_fun; last by rewrite mulr1n pnatr_eq0.
by rewrite derive_Q (eq_sym k0) mulr1n.
Qed.

(* the instance: a 1-2-1 ReLU network x |-> (1 1) relu(W x), squared loss against the target 1 at the
   input x = 1, block l = W (the first layer's weight) at W = (2, -2): one hidden pre-activation is
   positive, the other negative.  Near W the loss is the polynomial (W_0 - 1)² of its linear region
   (rloss_near), so L is differentiable near W, its partials are differentiable at W, g = 2 e_W00
   <> 0, H = 2 e_W00 e_W00ᵀ, and T3's law holds for every c > 0 *)
Theorem T3_relu_instance :
  let L := fun v : wvec R 1 0 =>
    (\sum_(s < 1) (eval (@relu _) (plug (Hole R 1)
                     (Layer (unvec v) 0 (Out (const_mx 1 : 'M[R]_(1, 2)) 0)))
                   (1%:M : 'cV[R]_1) 0 0 - 1) ^+ 2 : R^o) in
  let w := vec (\col_(i < 2) ((-1) ^+ i *+ 2) : 'M[R]_(2, 1)) in
  [/\ (forall c z : R, 0 < c -> relu (c * z) = c ^+ 1 * relu z),
      0 < (unvec w *m 1%:M + 0) 0 0 /\ (unvec w *m 1%:M + 0) 1 0 < 0,
      differentiable_near L w,
      (forall j, differentiable (fun y => (d1 L (e j) y : R^o)) w) &
      [/\ grad L w = 2%:R *: vec (delta_mx 0 0), grad L w != 0,
          hess L w = 2%:R *: (vec (delta_mx 0 0) *m (vec (delta_mx 0 0))^T) &
          forall c : R, 0 < c ->
          let L' := fun v : wvec R 1 0 =>
            (\sum_(s < 1) (eval (@relu _) (plug (Hole R 1)
                             (Layer (unvec v) (c *: 0)
                                (rmul_first ((c ^+ 1)^-1)%:M (Out (const_mx 1 : 'M[R]_(1, 2)) 0))))
                           (1%:M : 'cV[R]_1) 0 0 - 1) ^+ 2 : R^o) in
          T3_law L L' w c]].
Proof.
move=> L w; have EL : L = rloss by [].
have Ew : w = vec W0 by [].
have [dL dD gE hE] := near_eq_local rloss_near P_near d1_P_diff.
split.
- exact: relu_hom.
- rewrite Ew vecK mulmx1 addr0 !mxE expr0 expr1 mulNrn oppr_lt0.
  by split; exact: ltr0Sn.
- by rewrite EL Ew.
- by rewrite EL Ew.
split.
- by rewrite EL Ew gE grad_P.
- rewrite EL Ew gE grad_P scaler_eq0 pnatr_eq0 /= vec_delta00.
  by apply/negP => /eqP/matrixP/(_ k0 0); rewrite !mxE !eqxx /= => /eqP; rewrite oner_eq0.
- by rewrite EL Ew hE hess_P.
- move=> c c0.
  exact: (@T3_network_W R (@relu _) 1 (@relu_hom _) 1 0 1 1 (Hole R 1) (\col_(i < 2) ((-1) ^+ i *+ 2))
            0 (Out (const_mx 1 : 'M[R]_(1, 2)) 0) 1 (fun=> 1%:M) (fun _ z => (z 0 0 - 1) ^+ 2) c c0).
Qed.

End ReluInstance.

Section ReluNext.
Variable R : realType.
Local Notation V2 := (wvec R 0 1).

Definition rloss2 (v : V2) : R^o :=
  \sum_(s < 1) (eval (@relu _) (plug (Hole R 1) (Layer (\col_(i < 2) ((-1) ^+ i *+ 2) : 'M[R]_(2, 1)) 0 (Out (unvec v) 0)))
                  (1%:M : 'cV[R]_1) 0 0 - 1) ^+ 2.

Definition m0 : 'I_(1 + 0 * 2).+1 := mxvec_index (0 : 'I_1) (0 : 'I_2).
Definition Q2 (v : V2) : R^o := 2%:R * v m0 0 - 1.

Lemma rloss2E (v : V2) : rloss2 v = Q2 v * Q2 v.
Proof.
rewrite /rloss2 big_ord1 /= mulmx1 !addr0 !mxE !big_ord_recl big_ord0 !mxE.
have -> : lift ord0 ord0 = 1 :> 'I_2 by apply/val_inj.
rewrite expr0 expr1 mulNrn /relu.
rewrite Order.POrderTheory.max_l ?ler0n // Order.POrderTheory.max_r; last first.
  by rewrite oppr_le0 ler0n.
by rewrite mulr0 !addr0 /Q2 -expr2 mulrC.
Qed.

Lemma diff_Q2 (x : V2) : differentiable Q2 x.
Proof.
have -> : Q2 = (2%:R : R) *: (fun v : V2 => (v m0 0 : R^o)) - cst 1 by [].
apply: differentiableB; last exact: differentiable_cst.
by apply: differentiableZ; exact: differentiable_coord.
Qed.

Lemma derive_Q2 (x : V2) j : derive Q2 x (e j) = 2%:R * (m0 == j)%:R.
Proof.
rewrite /derive /=.
apply: (lim_near_cst (@norm_hausdorff _ [pseudoMetricNormedZmodType R of R^o])).
move: (near_neq0 R); apply: filterS => h h0.
rewrite /Q2 !mxE eqxx andbT regular_scaleE.
have E (a b c d : R) : a * (b + c) - d - (a * c - d) = b * a by ring.
by rewrite E -mulrA mulrA mulVf // mul1r mulrC.
Qed.

Lemma d1_rloss2 j : (fun y : V2 => (d1 rloss2 (e j) y : R^o)) = ((m0 == j)%:R *+ 4 : R) *: Q2.
Proof.
apply/funext => y; rewrite /d1.
have -> : rloss2 = Q2 * Q2 by apply/funext => v; rewrite rloss2E.
rewrite deriveM ?derive_Q2; try exact/diff_derivable/diff_Q2.
rewrite !regular_scaleE.
change (Q2 y * (2%:R * (m0 == j)%:R) + Q2 y * (2%:R * (m0 == j)%:R) = (m0 == j)%:R *+ 4 * Q2 y).
by rewrite -mulr2n -mulrnAr mulrC mulr_natl -mulrnA.
Qed.

Lemma vec_delta00' : vec (delta_mx 0 0 : 'M[R]_(1, 2)) = delta_mx m0 0.
Proof. by rewrite /vec mxvec_delta trmx_delta. Qed.

Lemma Q2_w : Q2 (vec (const_mx 1 : 'M[R]_(1, 2))) = 1.
Proof.
rewrite /Q2 /vec mxE /m0 mxvecE mxE mulr1.
by rewrite -[2%:R]/((1 + 1)%:R : R) natrD addrK.
Qed.

(* the block W_{l+1} = W2 of the same network (the output layer), at W2 = (1 1), W_l = (2, -2): the
   loss is the polynomial (2 v_0 - 1)² in it, every hypothesis holds, g = 4 e <> 0 *)
Theorem T3_relu_next_instance :
  let L := fun v : wvec R 0 1 =>
    (\sum_(s < 1) (eval (@relu _) (plug (Hole R 1)
                     (Layer (\col_(i < 2) ((-1) ^+ i *+ 2) : 'M[R]_(2, 1)) 0 (Out (unvec v) 0)))
                   (1%:M : 'cV[R]_1) 0 0 - 1) ^+ 2 : R^o) in
  let w := vec (const_mx 1 : 'M[R]_(1, 2)) in
  [/\ differentiable_near L w,
      (forall j, differentiable (fun y => (d1 L (e j) y : R^o)) w),
      grad L w = 4%:R *: vec (delta_mx 0 0), grad L w != 0 &
      forall c : R, 0 < c ->
      let L' := fun v : wvec R 0 1 =>
        (\sum_(s < 1) (eval (@relu _) (plug (Hole R 1)
                         (Layer (c *: (\col_(i < 2) ((-1) ^+ i *+ 2) : 'M[R]_(2, 1))) (c *: 0)
                            (Out (unvec v) 0)))
                       (1%:M : 'cV[R]_1) 0 0 - 1) ^+ 2 : R^o) in
      let a := c ^- 1 in
      T3_law L L' w a].
Proof.
move=> L w; have EL : L = rloss2 by [].
have gE : grad L w = 4%:R *: vec (delta_mx 0 0).
  apply/matrixP => k b; rewrite !ord1 vec_delta00' !mxE EL.
  have := congr1 (fun f => f w) (d1_rloss2 k); rewrite /= => ->.
  change ((m0 == k)%:R *+ 4 * Q2 w = 4%:R * ((k == m0) && ((0 : 'I_1) == 0))%:R).
  by rewrite Q2_w mulr1 (eq_sym m0) andbT -mulr_natl.
split.
- rewrite /differentiable_near EL; near=> y.
  have -> : rloss2 = Q2 * Q2 by apply/funext => v; rewrite rloss2E.
  by apply: differentiableM; exact: diff_Q2.
- by move=> j; rewrite EL d1_rloss2; apply: differentiableZ; exact: diff_Q2.
- exact: gE.
- rewrite gE scaler_eq0 pnatr_eq0 /= vec_delta00'.
  by apply/negP => /eqP/matrixP/(_ m0 0); rewrite !mxE !eqxx /= => /eqP; rewrite oner_eq0.
- move=> c c0.
  exact: (@T3_network_next_out R (@relu _) 1 (@relu_hom _) 1 1 1 0 (Hole R 1)
            (\col_(i < 2) ((-1) ^+ i *+ 2)) 0 (const_mx 1) 0 1 (fun=> 1%:M)
            (fun _ z => (z 0 0 - 1) ^+ 2) c c0).
Unshelve. all: by end_near.
Qed.

End ReluNext.
