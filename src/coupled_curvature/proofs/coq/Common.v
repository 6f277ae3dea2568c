(* The vector facts every file shares, proved once here: uᵀv (dot), ‖u‖² (sqnorm), wᵀHw (quad) and
   the standard basis vectors e_i of Defs.v, over any real closed field and every size n.
     - dot is symmetric and bilinear (dotC, dotDl, dotZl, ...), dot (A u) v = dot u (Aᵀ v);
     - sqnorm is ≥ 0, zero only at 0, sqnorm (a u) = a² sqnorm u; Cauchy–Schwarz with its
       equality case;
     - e_i: (e_i)_j = [i = j] (e_entry), dot e_i v = v_i, e_iᵀ M e_j = M_ij, ‖e_i‖ = 1;
     - quad is linear in H, quad (JᵀHJ) x = quad H (J x), quad 1 x = ‖x‖².
   The T1 invariance of wᵀHw and wᵀg under the block action (quad_act, dot_act) is T1's own
   statement and lives in T01_transformation_law.v. *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp Require Import ring.
From CoupledCurvature Require Import Defs.

Section Common.
Variable R : rcfType.
Variable n : nat.
Implicit Types (u v w x g : 'cV[R]_n) (A B H J M : 'M[R]_n) (i j : 'I_n).
Local Notation e := (@e R n).

Lemma dotE u v : dot u v = \sum_i u i 0 * v i 0.
Proof. by rewrite /dot mxE; apply: eq_bigr => i _; rewrite mxE. Qed.

Lemma dotC u v : dot u v = dot v u.
Proof. by rewrite !dotE; apply: eq_bigr => i _; rewrite mulrC. Qed.

Lemma dotDl u u' v : dot (u + u') v = dot u v + dot u' v.
Proof. by rewrite !dotE -big_split; apply: eq_bigr => i _; rewrite !mxE mulrDl. Qed.

Lemma dotBl u u' v : dot (u - u') v = dot u v - dot u' v.
Proof. by rewrite !dotE -sumrB; apply: eq_bigr => i _; rewrite !mxE mulrBl. Qed.

Lemma dotZl a u v : dot (a *: u) v = a * dot u v.
Proof. by rewrite !dotE mulr_sumr; apply: eq_bigr => i _; rewrite !mxE mulrA. Qed.

Lemma dotDr u v v' : dot u (v + v') = dot u v + dot u v'.
Proof. by rewrite dotC dotDl !(dotC u). Qed.

Lemma dotBr u v v' : dot u (v - v') = dot u v - dot u v'.
Proof. by rewrite dotC dotBl !(dotC u). Qed.

Lemma dotZr a u v : dot u (a *: v) = a * dot u v.
Proof. by rewrite dotC dotZl dotC. Qed.

Lemma dot0l v : dot 0 v = 0.
Proof. by rewrite dotE big1 // => i _; rewrite mxE mul0r. Qed.

Lemma dot0r u : dot u 0 = 0.
Proof. by rewrite dotC dot0l. Qed.

Lemma dot_mulmx A u v : dot (A *m u) v = dot u (A^T *m v).
Proof. by rewrite /dot trmx_mul mulmxA. Qed.

Lemma sqnorm0 : sqnorm (0 : 'cV[R]_n) = 0.
Proof. exact: dot0l. Qed.

Lemma sqnormZ a u : sqnorm (a *: u) = a ^+ 2 * sqnorm u.
Proof. by rewrite /sqnorm dotZl dotZr mulrA expr2. Qed.

Lemma sqnorm_ge0 u : 0 <= sqnorm u.
Proof. by rewrite /sqnorm dotE; apply: sumr_ge0 => i _; rewrite -expr2 sqr_ge0. Qed.

Lemma sqnorm_gt0 u : u != 0 -> 0 < sqnorm u.
Proof.
case/matrix0Pn => i [j]; rewrite (ord1 j) => ui.
rewrite /sqnorm dotE (bigD1 i) //=; apply: ltr_paddr.
  by apply: sumr_ge0 => k _; rewrite -expr2 sqr_ge0.
by rewrite lt0r mulf_neq0 //= -expr2 sqr_ge0.
Qed.

Lemma sqnorm_eq0 u : (sqnorm u == 0) = (u == 0).
Proof.
apply/idP/idP; last by move/eqP->; rewrite sqnorm0.
by apply: contraTT => /sqnorm_gt0; rewrite lt0r => /andP[].
Qed.

Lemma sqnorm_mul_gt0 B u : B \in unitmx -> u != 0 -> 0 < sqnorm (B *m u).
Proof.
move=> Bu u0; apply: sqnorm_gt0; apply: contraNneq u0 => Bu0.
by rewrite -(mulKmx Bu u) Bu0 mulmx0.
Qed.

(* ‖u‖²‖v‖² − (u·v)² = ‖v‖² ‖u − t v‖² with t = (u·v)/‖v‖² *)
Lemma cs_identity u v : sqnorm v != 0 ->
  sqnorm u * sqnorm v - dot u v ^+ 2
  = sqnorm v * sqnorm (u - (dot u v / sqnorm v) *: v).
Proof.
move=> v0; rewrite /sqnorm dotBl !dotBr !dotZl !dotZr (dotC v u).
rewrite -/(sqnorm u) -/(sqnorm v); set s := sqnorm v; set d := dot u v.
by field.
Qed.

Lemma cauchy_schwarz u v : dot u v ^+ 2 <= sqnorm u * sqnorm v.
Proof.
have [->|v0] := eqVneq v 0; first by rewrite dot0r sqnorm0 expr0n mulr0.
rewrite -subr_ge0 cs_identity ?sqnorm_eq0 //.
by rewrite mulr_ge0 ?sqnorm_ge0.
Qed.

Lemma cauchy_schwarz_eq u v : v != 0 ->
  sqnorm u * sqnorm v = dot u v ^+ 2 -> u = (dot u v / sqnorm v) *: v.
Proof.
move=> v0 heq; have s0 : sqnorm v != 0 by rewrite sqnorm_eq0.
have := cs_identity u s0; rewrite heq subrr => /esym/eqP.
by rewrite mulf_eq0 (negbTE s0) /= sqnorm_eq0 subr_eq0 => /eqP.
Qed.

(* the basis vectors *)
Lemma e_entry i j : e i j 0 = (j == i)%:R.
Proof. by rewrite mxE eqxx andbT. Qed.

Lemma e_neq0 i : e i != 0.
Proof. by apply/matrix0Pn; exists i, 0; rewrite mxE !eqxx oner_neq0. Qed.

Lemma dot_e_l i v : dot (e i) v = v i 0.
Proof. by rewrite /dot /e trmx_delta -rowE mxE. Qed.

Lemma dot_e_r i v : dot v (e i) = v i 0.
Proof. by rewrite dotC dot_e_l. Qed.

Lemma dot_e i j : dot (e i) (e j) = (i == j)%:R.
Proof. by rewrite dot_e_l e_entry eq_sym. Qed.

Lemma sqnorm_e i : sqnorm (e i) = 1.
Proof. by rewrite /sqnorm dot_e eqxx. Qed.

(* e_iᵀ M e_j = M_ij *)
Lemma dot_e_mxE M i j : dot (e i) (M *m e j) = M i j.
Proof. by rewrite /dot /e trmx_delta -colE -rowE !mxE. Qed.

Lemma mul_e M j : M *m e j = col j M.
Proof. by rewrite colE. Qed.

Lemma cV_sum_e v : v = \sum_j v j 0 *: e j.
Proof.
apply/matrixP => i k; rewrite ord1 summxE (bigD1 i) //= big1 => [|j ji].
  by rewrite !mxE !eqxx mulr1 addr0.
by rewrite !mxE eq_sym (negbTE ji) mulr0.
Qed.

(* wᵀHw *)
Lemma quad1 w : quad 1%:M w = sqnorm w.
Proof. by rewrite /quad mul1mx. Qed.

Lemma quadD A B x : quad (A + B) x = quad A x + quad B x.
Proof. by rewrite /quad mulmxDl dotDr. Qed.

Lemma quad_scale a H w : quad (a *: H) w = a * quad H w.
Proof. by rewrite /quad -scalemxAl dotZr. Qed.

Lemma quad_sum (K : 'I_n -> 'M[R]_n) (c : 'I_n -> R) x :
  quad (\sum_k c k *: K k) x = \sum_k c k * quad (K k) x.
Proof.
rewrite /quad /dot mulmx_suml mulmx_sumr summxE; apply: eq_bigr => k _.
by rewrite -scalemxAl -scalemxAr mxE.
Qed.

Lemma quad_congr J H x : quad (J^T *m H *m J) x = quad H (J *m x).
Proof. by rewrite /quad /dot trmx_mul !mulmxA. Qed.

Lemma quad_delta i j x : quad (delta_mx i j) x = x i 0 * x j 0.
Proof.
rewrite /quad; have -> : delta_mx i j *m x = x j 0 *: e i.
  apply/matrixP => a b; rewrite ord1 !mxE (bigD1 j) //= big1 => [|l lj].
    by rewrite !mxE !eqxx andbT addr0 mulrC; case: (a == i); rewrite ?mulr1 ?mulr0 ?mul1r ?mul0r.
  by rewrite mxE (negbTE lj) andbF mul0r.
by rewrite dotZr dot_e_r mulrC.
Qed.

Lemma quad_rank1 v w : quad (v *m v^T) w = dot v w ^+ 2.
Proof.
rewrite /quad -mulmxA [v^T *m w]mx11_scalar -/(dot v w) mul_mx_scalar dotZr.
by rewrite dotC expr2.
Qed.

End Common.
